"""The cell search's edges agree with the exact pass on real sentence-transformer vectors:
MiniLM embeddings of entity names GPT extracted from musique_100 (slow: embeds 2,500 names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs

OPENIE = (
    Path(__file__).resolve().parents[3]
    / "shared/benchmarks/musique_100/openie_results_ner_gpt-3.5-turbo-1106.json"
)
# as the other tests of the benchmark data: a checkout without ../shared skips, not fails
pytestmark = pytest.mark.skipif(not OPENIE.exists(), reason=f"benchmark data not found at {OPENIE}")


def test_cell_search_recall_on_minilm_entity_vectors(embedder):
    docs = json.loads(OPENIE.read_text())["docs"]
    names = sorted({e for d in docs for e in d["extracted_entities"]})[:2500]
    vectors = embedder.embed(names)
    exact = synonym_pairs(vectors, names)
    found = synonym_pairs(vectors, names, SynonymConfig(exact_max=0, cell_size=64))
    e = set(zip(exact[0].tolist(), exact[1].tolist()))
    f = set(zip(found[0].tolist(), found[1].tolist()))
    assert len(e) > 50
    recall = len(e & f) / len(e)
    print(f"edges {len(e)}, cell search recall {recall:.4f}, extra {len(f - e)}")
    assert recall >= 0.95
    assert not f - e  # top-k does not bind here: every cell edge is an exact edge
