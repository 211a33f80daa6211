"""Ablations: synonym edges removed from a snapshot, variants scored on a real indexed home."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import scipy.sparse as sp

from qortex_bench.ablation import (
    Variant,
    default_variants,
    markdown_table,
    run_ablation,
    without_synonyms,
)
from qortex_bench.datasets import load_questions
from qortex_core.query.retriever import RetrievalConfig
from qortex_core.storage import snapshot as snap
from qortex_core.storage.symmetry import weighted_degree


def _snapshot_with_synonyms() -> snap.Snapshot:
    """3 phrases + 1 passage: a relation edge 0-1 (1.0), synonyms 0-1 (0.95) and 1-2 (0.82), containment 3-0."""
    dense = np.zeros((4, 4), np.float32)
    for (i, j), w in {(0, 1): 1.95, (1, 2): 0.82, (3, 0): 1.0}.items():
        dense[i, j] = dense[j, i] = w
    adj = sp.csr_matrix(dense)
    arrays = {
        "adj_indptr": adj.indptr,
        "adj_indices": adj.indices,
        "adj_data": adj.data,
        "synonym_pairs": np.array([[0, 1], [1, 2]], np.int32),
        "synonym_weights": np.array([0.95, 0.82], np.float32),
    }
    return snap.Snapshot(arrays=arrays, tables={}, manifest={"counts": {"phrases": 3}})


def test_without_synonyms_subtracts_exactly_the_synonym_edges():
    full = _snapshot_with_synonyms()
    none = without_synonyms(full).adjacency.toarray()
    assert (
        none[0, 1] == none[1, 0] == np.float32(1.95) - np.float32(0.95)
    )  # the relation edge stays
    assert none[1, 2] == none[2, 1] == 0 and none[0, 3] == 1.0
    assert without_synonyms(full).adjacency.nnz == 4  # the zeroed 1-2 edge is gone, not stored as 0
    stale = {**full.arrays, "adj_degree": weighted_degree(full.adjacency)}  # as a build stores
    reduced = without_synonyms(dataclasses.replace(full, arrays=stale))
    assert np.array_equal(reduced.arrays["adj_degree"], none.sum(axis=1).astype(np.float32))
    weak = without_synonyms(full, below=0.9).adjacency.toarray()  # only the 0.82 edge is below 0.9
    assert np.isclose(weak[0, 1], 1.95) and weak[1, 2] == 0
    assert np.array_equal(
        full.adjacency.toarray(), without_synonyms(full, below=0.5).adjacency.toarray()
    )
    scaled = dataclasses.replace(
        full,
        manifest={"counts": {"phrases": 3}, "params": {"graph": {"synonym_scale": 2.0}}},
        arrays={**full.arrays, "synonym_weights": np.array([1.9, 1.64], np.float32)},
    )
    assert without_synonyms(scaled, below=0.9).adjacency.toarray()[1, 2] == np.float32(
        0.82
    ) - np.float32(1.64)


def test_default_variants_change_one_thing_each():
    rows = default_variants()
    names = [r.name for r in rows]
    assert len(names) == len(set(names)) and names[:2] == [
        "dense (same embedder)",
        "qortex defaults",
    ]
    base = RetrievalConfig()
    assert {
        r.name
        for r in rows
        if r.config == base and r.synonyms and r.synonym_min == 0 and r.mode == "hipporag"
    } == {"qortex defaults", "damping 0.5", "passage weight 0.05"}


def test_run_ablation_on_the_toy_home(toy_home, toy_dataset, toy_report, embedder):
    questions = load_questions(toy_dataset.questions)
    variants = [
        Variant("dense", RetrievalConfig(), mode="dense"),
        Variant("defaults", RetrievalConfig()),
        Variant("no synonyms", RetrievalConfig(), synonyms=False),
    ]
    rows = run_ablation(toy_home, questions, embedder, variants, ks=(1, 2))
    assert [r["variant"] for r in rows] == ["dense", "defaults", "no synonyms"]
    for mode, row in (("dense", rows[0]), ("hipporag", rows[1])):  # the same figures as qortex eval
        assert row["recall@1"] == toy_report["results"][mode]["recall@1"]
        assert row["recall@2"] == toy_report["results"][mode]["recall@2"]
    table = markdown_table(rows)
    assert table.splitlines()[0] == "| variant | recall@1 | recall@2 |"
    assert (
        f"| defaults | {100 * rows[1]['recall@1']:.1f} | {100 * rows[1]['recall@2']:.1f} |" in table
    )


def test_cli_ablation_writes_markdown_and_json(toy_home, toy_dataset, tmp_path):
    from qortex_cli.main import main

    md, js = tmp_path / "a.md", tmp_path / "a.json"
    assert (
        main(
            [
                "ablation",
                "--questions",
                str(toy_dataset.questions),
                "--home",
                str(toy_home),
                "--markdown",
                str(md),
                "--json",
                str(js),
            ]
        )
        == 0
    )
    rows = json.loads(js.read_text())
    assert [r["variant"] for r in rows] == [v.name for v in default_variants()]
    assert md.read_text().count("\n") == len(rows) + 2
