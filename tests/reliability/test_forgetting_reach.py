"""Forgetting reaches everything a result shows (issue 35, item 5).

A consolidated memory, a file's passage and the first revision of an updated memory are taken
out of search (forgotten, forgotten by ``p_`` id, updated past) with no consolidation after:
no seed, ``via`` fact, concept or rule that came only from them may appear in any result, in
every mode, through ``Memory.search``, ``Retriever.query`` and ``qortex query --json``. A
concept a live passage still holds stays (forgetting hides no more than it must). Real Dagster
runs, LanceDB on disk.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from faults import run_cli

import pipelines.resources as resources
import qortex_core
import qortex_core.query.retriever as retriever_module
from qortex_cli.runs.local import run_ingest
from qortex_core.query.retriever import MODES, Retriever

FILES = {
    "pump.md": "# Orion Pump\n\nThe Orion Pump is serviced by the Delta Crew every spring.\n",
    "valve.md": "# Vega Valve\n\nThe Vega Valve regulates the Orion Pump outflow at Cedar Ridge.\n",
    "kiln.md": "# Brannock Kiln\n\nThe Brannock Kiln must always be cooled by Hollis Ward "
    "before the Tarrow Fair.\n",
}
FORGET = (
    "Operators must always inspect the Zorblat Engine and the Orion Pump before the Quorin "
    "Festival."
)
OLD = "The Pellam Turbine must never run during the Wexbury Gale."
NEW = "The Pellam Turbine is oiled by the Delta Crew."
# variant -> (question, words that came only from what was taken out)
CASES = {
    "forgotten memory": (
        "Who must inspect the Zorblat Engine before the Quorin Festival?",
        ("zorblat", "quorin", "operators"),
    ),
    "forgotten file passage": (
        "Who must cool the Brannock Kiln before the Tarrow Fair?",
        ("brannock", "tarrow", "hollis"),
    ),
    "updated memory": ("When must the Pellam Turbine never run?", ("wexbury", "gale")),
}


def shown(result) -> str:
    """Every name and text a result shows, but its query: seeds and their ``via`` facts,
    concepts, rules and their concepts, passages with their seeds and concepts."""
    data = asdict(result)
    parts = [json.dumps(data[k]) for k in ("passages", "concepts", "seeds", "rules")]
    return " ".join(parts).lower()


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder):
    resources._embedders[("bundled", "")] = embedder
    root = tmp_path_factory.mktemp("reach")
    src, home = root / "src" / "plant", root / "home"
    src.mkdir(parents=True)
    for name, text in FILES.items():
        (src / name).write_text(text)
    run_ingest(src.parent, home, progress=False)
    mem = qortex_core.open(home, embedder=embedder)
    forget = mem.remember(FORGET, time="2026-01-10")
    update = mem.remember(OLD, time="2026-01-11")
    outcome = run_ingest(None, home, progress=False)
    assert all(outcome.checks.values())
    before = Retriever.open(home, embedder=embedder)
    for question, words in CASES.values():  # the graph names them before they are taken out
        seen = shown(before.query(question, mode="hipporag", min_relevance=0))
        assert all(w in seen for w in words), (question, seen)
    kiln = next(p for p in before.view.passages if "Brannock" in p["text"])
    mem.forget(forget.id)
    mem.forget(kiln["id"])
    mem.update(update.id, NEW)
    yield home
    resources._embedders.pop(("bundled", ""), None)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", MODES)
def test_the_library_shows_nothing_of_what_was_taken_out(home, embedder, mode, case):
    question, words = CASES[case]
    mem = qortex_core.open(home, embedder=embedder)
    retriever = Retriever.open(home, embedder=embedder)
    for result in (
        mem.search(question, mode=mode, min_relevance=0),
        retriever.query(question, mode=mode, min_relevance=0),
    ):
        seen = shown(result)
        assert not [w for w in words if w in seen], (mode, case, seen)


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_shows_nothing_of_what_was_taken_out(home, embedder, capsys, monkeypatch, mode):
    monkeypatch.setattr(retriever_module, "make_embedder", lambda: embedder)
    for question, words in CASES.values():
        out = run_cli(capsys, "query", question, "--home", home, "--mode", mode, "--json",
                      "--min-relevance", "0")  # fmt: skip
        assert out.code == 0, out.stderr
        data = json.loads(out.stdout)
        seen = " ".join(json.dumps(data[k]) for k in ("passages", "concepts", "seeds", "rules"))
        assert not [w for w in words if w in seen.lower()], (mode, question, seen)


@pytest.mark.parametrize("mode", ["auto", "hipporag", "hybrid"])
def test_what_a_live_passage_still_holds_stays(home, embedder, mode):
    """The forgotten memory named the Orion Pump too: the files still do, so it still seeds."""
    result = Retriever.open(home, embedder=embedder).query(
        "Who services the Orion Pump every spring?", mode=mode, min_relevance=0
    )
    assert "orion pump" in " ".join(c.name.lower() for c in result.concepts)
    assert any("orion pump" in s.name.lower() for s in result.seeds)
    assert result.passages[0].title == "Orion Pump"
