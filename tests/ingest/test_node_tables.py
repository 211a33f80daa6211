"""The embedding stage's column-wise concept/fact/rule tables equal the row-by-row merge they
replace (reproduced here as the reference), on a synthetic corpus and on hand-made edge cases."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.ingest import node_tables as node_tables_module
from qortex_core.ingest.chunk_stage import _payload
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.node_tables import node_tables
from qortex_core.storage import ids
from qortex_core.storage.model import Passage


def _reference(chunks, payloads):
    """The merge as the stage did it before: one dict per concept, fact and rule."""
    concepts: dict[str, dict] = {}
    facts: dict[str, dict] = {}
    rules: dict[str, dict] = {}
    for p in chunks:
        payload = payloads.get(p.id, {})
        for name, description in payload.get("concepts", []):
            c = concepts.setdefault(
                ids.concept_id(name),
                {"name": name, "description": description, "passage_ids": [], "domains": []},
            )
            c["passage_ids"].append(p.id)
            if p.domain not in c["domains"]:
                c["domains"].append(p.domain)
        for s, pred, o, relation in payload.get("facts", []):
            f = facts.setdefault(
                ids.fact_id(s, pred, o),
                {
                    "subject": s,
                    "predicate": pred,
                    "object": o,
                    "relation": relation,
                    "subject_id": ids.concept_id(s),
                    "object_id": ids.concept_id(o),
                    "passage_ids": [],
                },
            )
            f["passage_ids"].append(p.id)
            for name in (s, o):
                c = concepts.setdefault(
                    ids.concept_id(name),
                    {"name": name, "description": "", "passage_ids": [], "domains": []},
                )
                if p.id not in c["passage_ids"]:
                    c["passage_ids"].append(p.id)
        for text, names, category, confidence in payload.get("rules", []):
            r = rules.setdefault(
                ids.rule_id(text),
                {
                    "text": text,
                    "concepts": [ids.concept_id(n) for n in names],
                    "category": category,
                    "confidence": float(confidence),
                    "passage_ids": [],
                },
            )
            r["passage_ids"].append(p.id)
    return [[{"id": k, **rows[k]} for k in sorted(rows)] for rows in (concepts, facts, rules)]


def _assert_same(chunks, payloads):
    got = node_tables(chunks, payloads)
    want = _reference(chunks, payloads)
    for table, rows in zip(got, want):
        assert isinstance(table, pa.Table)
        assert table.to_pylist() == rows


@pytest.mark.parametrize("flush", [20_000, 7])  # occurrences gathered in one part, or in many
def test_synthetic_corpus_tables_equal_the_row_merge(flush, monkeypatch):
    monkeypatch.setattr(node_tables_module, "_FLUSH", flush)
    passages = SynthCorpus(SynthConfig(passages=300, seed=3)).passages()
    # three domains so the domain lists are exercised; chunks in id order, as the stage reads
    chunks = sorted(
        (dataclasses.replace(p, domain=f"d{i % 3}") for i, p in enumerate(passages)),
        key=lambda p: p.id,
    )
    extractions = OfflineExtractor().extract(chunks)
    payloads = {p.id: json.loads(_payload(ex)) for p, ex in zip(chunks[:-5], extractions)}
    concepts, facts, rules = node_tables(chunks, payloads)
    assert concepts.num_rows > 500 and facts.num_rows > 500 and rules.num_rows > 0
    _assert_same(chunks, payloads)
    as_json = {k: json.dumps(v) for k, v in payloads.items()}  # what the stage passes
    assert [t.to_pylist() for t in node_tables(chunks, as_json)] == _reference(chunks, payloads)


def test_edge_cases_equal_the_row_merge():
    a = Passage("alpha text", "A", "doc/a", "work")
    b = Passage("beta text", "B", "doc/b", "home")
    c = Passage("gamma text", "C", "doc/c", "work")
    chunks = sorted([a, b, c], key=lambda p: p.id)
    payloads = {
        a.id: {
            # listed twice in one chunk (two passage ids), and a fact endpoint of it too
            "concepts": [["Paris", "city"], ["paris", "again"], ["Seine", "river"]],
            "facts": [
                ["Paris", "lies on", "Seine", "located_in"],
                ["Paris", "is in", "France", "x"],
            ],
            "rules": [["Always  check the map", ["Paris", "Seine"], "advice", 0.5]],
        },
        b.id: {
            # France first seen as a fact endpoint here or in a: description "" either way
            "concepts": [["France", "country"]],
            "facts": [["PARIS", "lies on", "seine", "other"], ["Lyon", "near", "Lyon", "same"]],
            "rules": [["Always check the map", ["Seine"], "warning", 1]],
        },
        c.id: {"concepts": [], "facts": [], "rules": []},
    }
    _assert_same(chunks, payloads)
    concepts, facts, rules = node_tables(chunks, payloads)
    paris = [r for r in concepts.to_pylist() if r["id"] == ids.concept_id("Paris")][0]
    assert sorted(paris["passage_ids"]) == sorted([a.id, a.id, b.id])
    assert paris["domains"] == ["work"]  # a fact endpoint adds no domain


def test_no_payloads_gives_empty_tables():
    chunks = [Passage("t", "T", "d", "x")]
    for table in node_tables(chunks, {}):
        assert table.num_rows == 0 and "id" in table.schema.names
