"""``qortex bench ingest``: ingestion speed end to end and per stage, against plain
sentence-transformers.

One run of the real ``ingest`` job over a corpus in a fresh data home, then
one plain ``SentenceTransformer.encode`` of exactly the distinct texts the embedding
stage embedded (same model object, same batch size, same process), then an
unchanged re-run. Ratios, not absolute times, are the result: the pipeline
overhead of the embedding stage (goal <= 10%) and the re-run's share of the
first run (goal <= 5%). On a shared machine the two encodes can see different
load, so the report also gives the stage's own split (wall seconds inside the
model versus the rest of the stage, ``overhead_inside_stage``) and CPU seconds
of the model inside the stage versus plain encode (``model_cpu_vs_plain_cpu``),
which contention from other processes barely moves. The model is warmed up on
a sample of the corpus before either is timed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from qortex_core.embed import EmbedderWrapper
from qortex_core.errors import ConfigError
from qortex_core.ingest.stages import STAGE_NAMES


def _write_source(corpus: Path, limit: int | None, folder: Path) -> int:
    """Copy (the first ``limit`` entries of) ``corpus`` into ``folder/bench/``; returns the entry
    count."""
    from qortex_bench.datasets import load_corpus

    passages = load_corpus(corpus)[: limit or None]
    (folder / "bench").mkdir(parents=True, exist_ok=True)
    rows = [{"title": p.title, "text": p.text} for p in passages]
    (folder / "bench" / "corpus.json").write_text(json.dumps(rows, ensure_ascii=False))
    return len(rows)


def _embedded_texts(home: Path) -> list[str]:
    """The distinct texts the embedding stage sends to the model: passages, concept names, fact
    texts and rule texts, deduplicated across tables as the embedding cache does."""
    from qortex_core.ingest.stages import read_chunks
    from qortex_core.storage.model import fact_text
    from qortex_core.storage.store import CONCEPTS, FACTS, RULES, LanceStore

    store = LanceStore.open(home)
    texts = [p.full_text for p in read_chunks(store)]
    concepts, facts, rules = store.read(CONCEPTS), store.read(FACTS), store.read(RULES)
    texts += concepts["name"].to_pylist() if concepts.num_rows else []
    if facts.num_rows:
        parts = (facts[c].to_pylist() for c in ("subject", "predicate", "object"))
        texts += [fact_text(s, p, o) for s, p, o in zip(*parts)]
    texts += rules["text"].to_pylist() if rules.num_rows else []
    return list(dict.fromkeys(texts))


def _cached_share(home: Path, model: str, texts: list[str]) -> float:
    """Share of ``texts`` whose vector the stage stored in the embedding cache (1.0: the plain
    encode embeds exactly the stage's texts)."""
    from qortex_core.storage import ids
    from qortex_core.storage.store import EMBEDDINGS, LanceStore

    stored = set(LanceStore.open(home).read(EMBEDDINGS)["key"].to_pylist())
    found = sum(ids.embedding_key(model, t) in stored for t in texts)
    return round(found / len(texts), 4) if texts else 1.0


def _plain_encode_seconds(model, texts: list[str], batch_size: int) -> tuple[float, float]:
    """Wall and CPU seconds of one plain ``encode`` of ``texts``."""
    start, cpu = time.perf_counter(), time.process_time()
    model.encode(
        texts,
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return time.perf_counter() - start, time.process_time() - cpu


class _TimedEmbedder(EmbedderWrapper):
    """The shared embedder, summing the seconds spent inside the model (the rest of the stage is
    overhead)."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.texts = 0

    def embed(self, texts):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu
            self.texts += len(texts)


def _timed_resource(timed: _TimedEmbedder):
    """An embedder resource handing out ``timed`` (in-process runs only)."""
    from pipelines.resources import EmbedderResource

    class TimedEmbedderResource(EmbedderResource):
        def get(self):
            return timed

    return TimedEmbedderResource()


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 2) if seconds > 0 else 0.0


def _warm_embedder(work: Path, spec: str):
    """The sentence-transformers model ``spec`` names, loaded and warmed on the first corpus
    rows."""
    from pipelines.resources import shared_embedder
    from qortex_core.embed import SentenceTransformerEmbedder

    embedder = shared_embedder(spec)
    if not isinstance(embedder, SentenceTransformerEmbedder):
        raise ConfigError(f"bench ingest needs a local sentence-transformers model, not {spec!r}")
    source_rows = json.loads((work / "source" / "bench" / "corpus.json").read_text())
    embedder.embed(
        [f"{r['title']}\n{r['text']}" for r in source_rows[:128]]
        + [r["title"] for r in source_rows[:128]]
    )
    return embedder


def _embedding_vs_plain(first, embed_s, timed, plain_s, plain_cpu, texts, share) -> dict:
    """The embedding stage against a plain ``encode`` of the same texts."""
    model_s_in_stage, model_cpu_in_stage = timed.seconds, timed.cpu_seconds
    overhead = embed_s / plain_s - 1 if plain_s > 0 else None
    return {
        "texts": len(texts),
        "texts_embedded_by_stage": first.summary["embedded"],
        "plain_texts_in_stage_cache": share,
        "stage_s": round(embed_s, 2),
        "plain_encode_s": round(plain_s, 2),
        "overhead": round(overhead, 4) if overhead is not None else None,
        "model_s_inside_stage": round(model_s_in_stage, 2),
        "overhead_inside_stage": round(embed_s / model_s_in_stage - 1, 4)
        if model_s_in_stage
        else None,
        "model_cpu_s_inside_stage": round(model_cpu_in_stage, 2),
        "plain_encode_cpu_s": round(plain_cpu, 2),
        "model_cpu_vs_plain_cpu": round(model_cpu_in_stage / plain_cpu - 1, 4)
        if plain_cpu
        else None,
        "goal_overhead_le": 0.10,
        "goal_met": overhead is not None and overhead <= 0.10,
    }


def _first_run(first, first_s: float) -> dict:
    chunks = first.summary["chunks"]
    stages = {
        s: {
            "seconds": round(first.step_seconds.get(s, 0.0), 3),
            "passages_per_s": _rate(chunks, first.step_seconds.get(s, 0.0)),
        }
        for s in STAGE_NAMES
    }
    return {
        "seconds": round(first_s, 2),
        "passages_per_s": _rate(chunks, first_s),
        "stages": stages,
        "checks_seconds": round(
            sum(v for k, v in first.step_seconds.items() if k not in STAGE_NAMES), 3
        ),
        "summary": first.summary,
    }


def _rerun(second, second_s: float, first_s: float) -> dict:
    return {
        "seconds": round(second_s, 2),
        "ratio_to_first": round(second_s / first_s, 4),
        "llm_calls": second.summary["llm_calls"],
        "texts_embedded": second.summary["embedded"],
        "stages": {s: round(second.step_seconds.get(s, 0.0), 3) for s in STAGE_NAMES},
        "goal_ratio_le": 0.05,
        "goal_met": second_s / first_s <= 0.05,
    }


def run_bench(args: argparse.Namespace) -> dict:
    """Run the benchmark; returns the report."""
    from pipelines.resources import ExtractorResource
    from qortex_cli.runs.local import run_ingest

    work = (
        Path(args.workdir)
        if args.workdir
        else Path(tempfile.mkdtemp(prefix="qortex-bench-ingest-"))
    )
    n = _write_source(Path(args.corpus), args.limit, work / "source")
    home = work / "home"
    t = time.perf_counter()
    embedder = _warm_embedder(work, args.embedder)
    load_s = time.perf_counter() - t
    timed = _TimedEmbedder(embedder)
    chosen = {
        "extractor": ExtractorResource(kind=args.extractor, openie_path=args.openie or ""),
        "embedder": _timed_resource(timed),
    }
    print(f"bench ingest: {n} passages -> {home}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    first = run_ingest(
        work / "source", home, work / "dagster", resources=chosen, progress=args.progress
    )
    first_s = time.perf_counter() - t
    texts = _embedded_texts(home)
    print(f"plain encode of {len(texts)} texts ...", file=sys.stderr, flush=True)
    plain_s, plain_cpu = _plain_encode_seconds(embedder._load(), texts, embedder.config.batch_size)
    t = time.perf_counter()
    second = run_ingest(
        work / "source", home, work / "dagster", resources=chosen, progress=args.progress
    )
    second_s = time.perf_counter() - t
    embed_s = first.step_seconds.get("embeddings", 0.0)
    return {
        "corpus": str(args.corpus),
        "passages_in_corpus_slice": n,
        "chunks": first.summary["chunks"],
        "extractor": args.extractor,
        "embedding_model": embedder.name,
        "model_load_and_warmup_s": round(load_s, 2),
        "first_run": _first_run(first, first_s),
        "embedding_vs_plain": _embedding_vs_plain(
            first,
            embed_s,
            timed,
            plain_s,
            plain_cpu,
            texts,
            _cached_share(home, embedder.name, texts),
        ),
        "unchanged_rerun": _rerun(second, second_s, first_s),
        "workdir": str(work),
    }


def cmd_bench_ingest(args: argparse.Namespace) -> int:
    from qortex_core.errors import DatasetError

    if args.extractor == "recorded" and not args.openie:
        raise DatasetError("--extractor recorded needs --openie FILE")
    from qortex_cli.output import emit_report

    emit_report(run_bench(args), args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    """Add ``qortex bench ingest``."""
    p = kinds.add_parser(
        "ingest",
        help="ingestion speed: end to end, per stage, embedding overhead, unchanged re-run",
    )
    p.add_argument("--corpus", required=True, help="HippoRAG corpus JSON (list of {title, text})")
    p.add_argument("--extractor", choices=["offline", "recorded"], default="offline")
    p.add_argument("--openie", help="OpenIE results file for --extractor recorded")
    p.add_argument("--limit", type=int, help="only the first N passages")
    p.add_argument(
        "--embedder",
        default="bundled",
        help="a local sentence-transformers spec: bundled (default), minilm-int8 or st:PATH",
    )
    p.add_argument(
        "--workdir",
        help="folder for the source copy, data home and instance (default: a new temp folder)",
    )
    p.add_argument("--progress", action="store_true", help="step progress on stderr")
    p.add_argument("--json", help="also write the report to this file")
    p.set_defaults(func=cmd_bench_ingest)
