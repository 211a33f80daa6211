"""Abstention on queries nothing answers: the share answered with ``no_answer`` per mode.

The bundled query file (``qortex_bench/data/offtopic_queries.txt``) holds 50 queries written
for this check: 25 gibberish strings and 25 everyday off-topic requests. None comes from
a benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from qortex_core.errors import DatasetError

OFFTOPIC_QUERIES = Path(__file__).resolve().parent / "data" / "offtopic_queries.txt"


def load_queries(path: str | Path = OFFTOPIC_QUERIES) -> list[str]:
    """One query per line; blank lines and ``#`` comments are skipped.

    Raises:
        DatasetError: unreadable, or no query in it.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read the query file {path}: {exc}") from None
    queries = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if not queries:
        raise DatasetError(f"query file {path} holds no query")
    return queries


def abstention(retriever, queries: Sequence[str], modes: Sequence[str], top_k: int = 10) -> dict:
    """Per mode: ``{"queries", "no_answer"}`` (share abstained at the retriever's default
    ``min_relevance``) and ``best_relevance`` (median over queries of the best hit's
    relevance with abstention off)."""
    vectors = retriever.embedder.embed(list(queries))
    out = {}
    for mode in modes:
        abstained, best = 0, []
        for text, vector in zip(queries, vectors):
            res = retriever.search(text, vector, top_k=top_k, mode=mode)
            abstained += res.no_answer
            loose = retriever.search(text, vector, top_k=top_k, mode=mode, min_relevance=0.0)
            best.append(max((h.relevance for h in loose.passages), default=0.0))
        best.sort()
        out[mode] = {
            "queries": len(queries),
            "no_answer": abstained / len(queries),
            "best_relevance_median": best[len(best) // 2],
        }
    return out
