"""CLI: query --json ids, feedback, factors update, snapshots, pinning, prune; typed errors exit 2."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from qortex_cli.main import main
from qortex_core.feedback.factors import load_factors
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

sys.path.insert(0, str(Path(__file__).parent))
from memory_corpus import KITCHEN, corpus, ingest, passages  # noqa: E402


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> Path:
    path = tmp_path_factory.mktemp("cli_base")
    ingest(path, corpus()[:6], embedder)  # version 1: pumps only
    ingest(path, corpus(), embedder)  # version 2: pumps and kitchen
    return path


@pytest.fixture
def home(built, tmp_path, embedder, monkeypatch):
    target = tmp_path / "home"
    shutil.copytree(built, target)  # each test gets its own copy of the two-version home
    monkeypatch.setattr(
        "qortex_core.query.retriever.make_embedder", lambda: embedder
    )  # no second model load
    return target


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_query_feedback_factors_round_trip(home, capsys):
    code, out, _ = run(
        capsys,
        "query",
        "Who services the Orion Pump?",
        "--json",
        "--home",
        str(home),
        "--mode",
        "hipporag",
    )
    assert code == 0
    result = json.loads(out)
    ids = [p["id"] for p in result["passages"]]
    assert result["query_id"].startswith("q_") and ids and all(i.startswith("p_") for i in ids)
    assert all(r["id"].startswith("r_") and r["concepts"] for r in result["rules"])
    # accept the result that came through the fewest concepts and reject one that came through a
    # concept it did not: that concept is suppressed, the accepted ones boosted
    hits = sorted(result["passages"], key=lambda p: len(p["concept_ids"]))
    accepted = hits[0]["id"]
    rejected = next(
        p["id"] for p in hits[1:] if set(p["concept_ids"]) - set(hits[0]["concept_ids"])
    )
    code, out, _ = run(
        capsys,
        "feedback",
        "--query-id",
        result["query_id"],
        "--accept",
        accepted,
        "--reject",
        rejected,
        "--home",
        str(home),
        "--json",
    )
    assert code == 0 and json.loads(out)["recorded"] == 2
    code, out, _ = run(
        capsys, "factors", "update", "--via", "library", "--json", "--home", str(home)
    )
    summary = json.loads(out)
    assert code == 0 and summary["folded"] == 2 and summary["boosted"] and summary["suppressed"]
    factors, _ = load_factors(LanceStore.open(home))
    assert factors and min(factors.values()) < 1.0 < max(factors.values())
    code, out, _ = run(
        capsys, "factors", "update", "--via", "library", "--json", "--home", str(home)
    )
    assert json.loads(out)["skipped"]


def test_user_errors_are_one_line_exit_2(home, capsys):
    code, out, err = run(
        capsys, "feedback", "--query-id", "q_nope", "--accept", "p_x", "--home", str(home)
    )
    assert (
        code == 2
        and err.strip().startswith("qortex: error: unknown query id")
        and len(err.strip().splitlines()) == 1
    )
    code, _, err = run(capsys, "query", "pumps", "--home", str(home), "--profile", "nope")
    assert code == 2 and "unknown scoring profile" in err
    code, _, err = run(capsys, "query", "pumps", "--home", str(home), "--version", "9")
    assert code == 2 and "no snapshot version 9" in err
    code, _, err = run(capsys, "query", "pumps", "--home", str(home), "--tenant", "../x")
    assert code == 2 and "bad tenant name" in err
    code, _, err = run(capsys, "snapshots", "prune", "--keep", "0", "--home", str(home))
    assert code == 2 and "--keep" in err


def test_snapshots_list_pin_and_prune(home, capsys, embedder):
    code, out, _ = run(capsys, "snapshots", "--json", "--home", str(home))
    listed = json.loads(out)
    assert (
        code == 0
        and [s["version"] for s in listed] == [1, 2]
        and [s["latest"] for s in listed] == [False, True]
    )
    kitchen_ids = {p.id for p in passages(KITCHEN, "kitchen")}
    code, out, _ = run(
        capsys,
        "query",
        "Where is Amber Bread sold?",
        "--json",
        "--version",
        "1",
        "--home",
        str(home),
    )
    pinned = json.loads(out)
    assert (
        pinned["snapshot"] == listed[0]["name"]
        and not {p["id"] for p in pinned["passages"]} & kitchen_ids
    )
    code, out, _ = run(capsys, "query", "Where is Amber Bread sold?", "--json", "--home", str(home))
    assert json.loads(out)["snapshot"] == listed[1]["name"]
    ingest(home, corpus()[:7], embedder)  # version 3 is LATEST
    tables = LanceStore.open(home).table_names()
    code, out, _ = run(capsys, "snapshots", "prune", "--keep", "1", "--json", "--home", str(home))
    report = json.loads(out)
    assert code == 0 and report["removed"] == [listed[0]["name"], listed[1]["name"]]
    assert snap.list_versions(home) == [snap.latest_name(home)] and report["kept"] == [
        snap.latest_name(home)
    ]
    assert set(report["optimized"]) == set(tables)
    code, out, _ = run(capsys, "query", "Orion Pump", "--json", "--home", str(home))
    assert (
        code == 0 and json.loads(out)["passages"]
    )  # the latest snapshot and the tables still answer
