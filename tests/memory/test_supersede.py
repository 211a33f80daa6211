"""Facts over time on a real LanceDB home: supersession rules, as_of, include_superseded,
history links, both tiers, and the CLI's bad --as-of."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import qortex_core
from qortex_core.errors import RecordError

BERGEN = ("Goran Lindqvist lives in Bergen.", "2023-03-01T09:00:00Z")
LYON = ("Goran Lindqvist moved to Lyon.", "2023-09-01T09:00:00Z")
WHERE = "Where does Goran Lindqvist live now?"


@pytest.fixture
def mem(tmp_path: Path, embedder):
    return qortex_core.open(tmp_path / "home", embedder=embedder)


def _write(mem, *facts):
    return [mem.remember(text, time=when) for text, when in facts]


def _ids(result) -> list[str]:
    return [h.id for h in result.passages]


def test_a_newer_statement_of_the_attribute_supersedes_the_older(mem):
    old, new = _write(mem, BERGEN, LYON)
    assert mem.get(old.id).superseded_by == new.id
    assert mem.get(old.id).valid_until == LYON[1] and mem.get(old.id).valid_from == BERGEN[1]
    assert mem.get(new.id).superseded_by is None and mem.get(new.id).valid_until is None
    hits = mem.search(WHERE, top_k=5, min_relevance=0).passages
    assert hits[0].id == new.id and old.id not in [h.id for h in hits]
    assert hits[0].valid_from == LYON[1] and hits[0].valid_until is None
    assert len(mem.history(old.id)) == 1  # nothing rewritten: the statement stays as written


def test_event_time_orders_not_write_order(mem):
    new, old = _write(mem, LYON, BERGEN)  # the older fact arrives late
    assert mem.get(old.id).superseded_by == new.id
    assert mem.get(new.id).superseded_by is None
    assert _ids(mem.search(WHERE, top_k=1, min_relevance=0)) == [new.id]


def test_restating_the_same_value_changes_nothing(mem):
    first, again = _write(mem, LYON, ("Goran Lindqvist lives in Lyon.", "2023-10-01T09:00:00Z"))
    assert mem.get(first.id).superseded_by is None and mem.get(again.id).superseded_by is None


def test_the_same_attribute_of_another_subject_changes_nothing(mem):
    goran, petra = _write(mem, BERGEN, ("Petra Tanaka moved to Lyon.", LYON[1]))
    assert mem.get(goran.id).superseded_by is None and mem.get(petra.id).superseded_by is None


def test_another_attribute_of_the_subject_changes_nothing(mem):
    home, car = _write(mem, BERGEN, ("Goran Lindqvist drives a Volvo XC40.", LYON[1]))
    assert mem.get(home.id).superseded_by is None and mem.get(car.id).superseded_by is None
    assert _ids(mem.search(WHERE, top_k=1, min_relevance=0)) == [home.id]


def test_as_of_answers_what_was_true_then(mem):
    old, new = _write(mem, BERGEN, LYON)
    then = mem.search(WHERE, top_k=5, min_relevance=0, as_of="2023-05-01T00:00:00Z")
    assert _ids(then)[0] == old.id and new.id not in _ids(then)  # not yet said
    later = mem.search(WHERE, top_k=5, min_relevance=0, as_of="2024-01-01")
    assert _ids(later)[0] == new.id and old.id not in _ids(later)
    with pytest.raises(RecordError):
        mem.search(WHERE, as_of="last tuesday-ish")


def test_include_superseded_shows_the_old_statement_with_its_link(mem):
    old, new = _write(mem, BERGEN, LYON)
    hits = mem.search(WHERE, top_k=5, min_relevance=0, include_superseded=True).passages
    shown = {h.id: h for h in hits}
    assert shown[old.id].superseded_by == new.id and shown[old.id].valid_until == LYON[1]
    assert [r.id for r in mem.list()] == [new.id]
    assert {r.id for r in mem.list(include_superseded=True)} == {old.id, new.id}


def test_forgetting_the_successor_reopens_the_predecessor(mem):
    old, new = _write(mem, BERGEN, LYON)
    mem.forget(new.id)
    assert mem.get(old.id).superseded_by is None
    assert _ids(mem.search(WHERE, top_k=1, min_relevance=0)) == [old.id]


def test_another_process_folds_the_same_timeline(mem, tmp_path, embedder):
    old, new = _write(mem, BERGEN, LYON)
    other = qortex_core.open(tmp_path / "home", embedder=embedder)
    assert other.get(old.id).superseded_by == new.id


def test_graph_tier_hides_superseded_passages_after_consolidation(mem, embedder):
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.ingest.extract import OfflineExtractor

    old, new, _ = _write(mem, BERGEN, LYON, ("Goran Lindqvist drives a Volvo XC40.", LYON[1]))
    consolidate_home(Path(mem.home), embedder, None, OfflineExtractor())
    hits = mem.search(WHERE, top_k=5, min_relevance=0).passages
    assert hits[0].tier == "graph" and hits[0].text == LYON[0]
    assert hits[0].valid_from == LYON[1] and BERGEN[0] not in [h.text for h in hits]
    then = mem.search(WHERE, top_k=5, min_relevance=0, as_of="2023-05-01").passages
    assert then[0].text == BERGEN[0] and then[0].superseded_by == new.id


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qortex_cli", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_history_and_memories_show_the_links(mem):
    old, new = _write(mem, BERGEN, LYON)
    out = _cli("history", old.id, home=Path(mem.home)).stdout
    assert f"superseded by {new.id} at {LYON[1]}" in out
    assert f"supersedes {old.id}" in _cli("history", new.id, home=Path(mem.home)).stdout
    listed = _cli("memories", home=Path(mem.home)).stdout
    assert new.id in listed and old.id not in listed
    every = _cli("memories", "--include-superseded", home=Path(mem.home)).stdout
    assert f"{old.id} " in every and f"superseded by {new.id}" in every


def test_cli_query_refuses_a_bad_as_of_in_one_line(tmp_path):
    done = _cli("query", "where?", "--as-of", "next blue moon", home=tmp_path / "nohome")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("qortex: error: invalid --as-of") and done.stderr.count("\n") == 1


def test_graph_facts_of_a_superseded_memory_leave_with_it_in_every_mode(mem, embedder):
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.ingest.extract import OfflineExtractor

    _write(mem, BERGEN, LYON)
    consolidate_home(Path(mem.home), embedder, None, OfflineExtractor())
    query = "Goran Lindqvist Bergen"
    for mode in ("auto", "dense", "hipporag", "hybrid", "text", "textwalk"):
        now = mem.search(query, top_k=5, mode=mode, min_relevance=0)
        names = {c.name.lower() for c in now.concepts}
        assert "bergen" not in names and BERGEN[0] not in [h.text for h in now.passages], mode
        every = mem.search(query, top_k=5, mode=mode, min_relevance=0, include_superseded=True)
        if mode == "hipporag":  # the walk reaches the old statement's concept again
            assert "bergen" in {c.name.lower() for c in every.concepts}
