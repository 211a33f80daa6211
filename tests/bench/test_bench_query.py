"""`qortex bench query` on a real indexed home: it runs the retriever's own seeding and reports both modes."""

from __future__ import annotations

import json

import numpy as np
from conftest import BRIDGE_QUESTION

from qortex_bench import ppr_query_bench as qb
from qortex_core.query.ppr.solve import personalized_pagerank
from qortex_core.query.retriever import Retriever


def test_bench_seed_is_the_retrievers_walk(toy_home, embedder):
    """The teleport the bench times gives the PPR scores the query reports for its hits."""
    retriever = Retriever.open(toy_home, embedder=embedder)
    vector = embedder.embed([BRIDGE_QUESTION])[0]
    seeded = qb.seed(retriever, BRIDGE_QUESTION, vector)
    assert seeded.teleport is not None and seeded.teleport.shape == (retriever.adjacency.shape[0],)
    scores = personalized_pagerank(retriever.walk, seeded.teleport, retriever.config.ppr)
    result = retriever.search(BRIDGE_QUESTION, vector, 3, "hipporag")
    ids = [p["id"] for p in retriever.passages]
    for hit in result.passages:
        assert np.isclose(
            hit.breakdown["ppr"], scores[retriever.n_phrases + ids.index(hit.id)], rtol=1e-5
        )


def test_cli_bench_query_reports_latency_and_recall(
    toy_home, toy_dataset, tmp_path, capsys, monkeypatch
):
    from qortex_cli.main import main

    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "query",
            "--home",
            str(toy_home),
            "--queries",
            str(toy_dataset.questions),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    for mode in ("dense", "hipporag"):
        stats = report["latency"][mode]
        assert stats["queries"] == 2 and stats["end_to_end_p50_ms"] > 0
    assert (
        report["latency"]["hipporag"]["ppr_p50_ms"] > 0
        and report["latency"]["dense"]["ppr_p50_ms"] == 0
    )
    recall = report["recall_fast_vs_exact"]
    assert recall["fast"] == recall["exact"] and recall["ppr_l1_error_max"] < 1e-3
    assert "hipporag" in capsys.readouterr().out
