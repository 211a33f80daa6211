"""Tenant isolation: one tenant's passages, rules, queries and factors are invisible to another."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from qortex_core.errors import ConfigError, QueryError
from qortex_core.feedback.factors import load_factors
from qortex_core.query.retriever import Retriever
from qortex_core.storage.store import LanceStore
from qortex_core.storage.tenants import list_tenants, tenant_home

sys.path.insert(0, str(Path(__file__).parent))
from memory_corpus import KITCHEN, PUMPS, ingest, passages  # noqa: E402

SHARED = [
    ("Tilburg Market", "The Tilburg Market sells Amber Bread and Saffron Rice every Saturday.")
]
BOB_SECRET = [
    (
        "Bob Notes",
        "The Orion Pump backup key is kept at Lake Amber. Staff should never move the Orion Pump key.",
    )
]


@pytest.fixture(scope="module")
def homes(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("tenants")
    alice = passages(PUMPS + SHARED, "engineering")
    bob = passages(
        KITCHEN + BOB_SECRET, "kitchen"
    )  # KITCHEN already holds the shared Tilburg Market text
    ingest(tenant_home(root, "alice"), alice, embedder)
    ingest(tenant_home(root, "bob"), bob, embedder)
    return root, {p.id for p in alice}, {p.id for p in bob}


def test_queries_never_cross_tenants(homes, embedder):
    root, alice_ids, bob_ids = homes
    assert alice_ids & bob_ids  # the overlapping text has the same content id in both
    alice = Retriever.open(root, embedder=embedder, tenant="alice")
    bob = Retriever.open(root, embedder=embedder, tenant="bob")
    alice_rules = {r["id"] for r in alice.snapshot.tables["rules"].to_pylist()}
    for text in (
        "Where is the Orion Pump backup key kept?",
        "Who services the Orion Pump?",
        "Where is Amber Bread sold?",
    ):
        for mode in ("hipporag", "hybrid", "dense"):
            a = alice.query(text, top_k=20, mode=mode)
            b = bob.query(text, top_k=20, mode=mode)
            assert {h.id for h in a.passages} <= alice_ids and {h.id for h in b.passages} <= bob_ids
            assert {r.id for r in a.rules} <= alice_rules
            assert all(
                "backup key" not in h.text and "Orion Pump key" not in r.text
                for h in a.passages
                for r in a.rules
            )
    secret = bob.query("Where is the Orion Pump backup key kept?", top_k=3, mode="hipporag")
    assert "backup key" in secret.passages[0].text  # bob does see his own memory
    assert sorted(list_tenants(root)) == ["alice", "bob", "default"]


def test_feedback_and_factors_stay_in_their_tenant(homes, embedder):
    root, _, _ = homes
    alice = Retriever.open(root, embedder=embedder, tenant="alice")
    bob = Retriever.open(root, embedder=embedder, tenant="bob")
    asked = alice.query("Who services the Orion Pump?", top_k=3, mode="hipporag")
    with pytest.raises(QueryError, match="unknown query id"):
        bob.feedback(asked.query_id, rejected=[asked.passages[0].id])
    events = alice.feedback(asked.query_id, rejected=[asked.passages[0].id])
    assert events[0].tenant == "alice"
    alice.update_factors()
    assert load_factors(LanceStore.open(tenant_home(root, "alice")))[0]
    assert load_factors(LanceStore.open(tenant_home(root, "bob"))) == ({}, 0)


def test_bad_tenant_names_are_refused(tmp_path):
    for name in ("../bob", "Bob", "", "a/b", "x" * 65):
        with pytest.raises(ConfigError):
            tenant_home(tmp_path, name)
