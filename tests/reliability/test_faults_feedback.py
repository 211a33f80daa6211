"""Feedback that would count twice: a result named many times in one call, accept and reject of
the same result in one call, the same call repeated, and two processes appending one judgement.
"""

from __future__ import annotations

import json

import pytest
from conftest import BRIDGE_QUESTION
from faults import error_line, run_cli

from qortex_core.errors import QueryError
from qortex_core.feedback.events import (
    QueryLog,
    ResultTrace,
    append_events,
    make_events,
    read_events,
    record_feedback,
)
from qortex_core.feedback.factors import load_factors, update_factors
from qortex_core.storage.store import LanceStore


@pytest.fixture
def logged(tmp_path) -> tuple[LanceStore, QueryLog]:
    store = LanceStore.open(tmp_path / "home")
    log = QueryLog(store)
    log.record(
        "q_1",
        "v1",
        [ResultTrace("p_a", "passage", ("c_x",)), ResultTrace("p_b", "passage", ("c_y",))],
    )
    return store, log


def test_a_result_named_ten_thousand_times_is_one_judgement(logged):
    store, log = logged
    events = record_feedback(store, log, "q_1", accepted=["p_a"] * 10_000)
    assert [(e.result_id, e.kind) for e in events] == [("p_a", "accepted")]
    update_factors(store)
    assert load_factors(store)[0] == {"c_x": pytest.approx(1.1)}  # not pinned at the 10x ceiling


@pytest.mark.parametrize(
    "kinds", [("accepted", "rejected"), ("accepted", "partial"), ("rejected", "partial")]
)
def test_one_result_judged_two_ways_in_one_call_is_refused(logged, kinds):
    store, log = logged
    judged = {kinds[0]: ["p_a", "p_b"], kinds[1]: ["p_a"]}
    with pytest.raises(QueryError, match=rf"'p_a' .* both {kinds[0]} and {kinds[1]}"):
        record_feedback(store, log, "q_1", **judged)
    assert read_events(store)[0] == []  # nothing of the call was recorded


def test_a_repeated_call_is_idempotent(logged):
    store, log = logged
    first = record_feedback(store, log, "q_1", accepted=["p_a"], rejected=["p_b"])
    update_factors(store)
    factors, _ = load_factors(store)
    assert len(first) == 2
    for _ in range(3):
        assert record_feedback(store, log, "q_1", accepted=["p_a"], rejected=["p_b"]) == []
    assert len(read_events(store)[0]) == 2
    assert update_factors(store).skipped and load_factors(store)[0] == factors
    assert update_factors(store, force=True).folded == 2 and load_factors(store)[0] == factors
    # a new judgement of the same query (a change of mind) is still recorded
    assert [e.kind for e in record_feedback(store, log, "q_1", partial=["p_a"])] == ["partial"]


def test_the_same_judgement_appended_by_two_writers_counts_once(logged):
    store, log = logged
    events = make_events("q_1", {"rejected": ["p_a"]}, log.resolve("q_1"))
    append_events(store, events)  # two processes that both checked before either appended
    append_events(LanceStore.open(store.config.home), events)
    assert store.open_latest("feedback_events").count_rows() == 2
    assert [e.event_id for e in read_events(store)[0]] == [events[0].event_id]
    update_factors(store)
    assert load_factors(store)[0] == {"c_x": pytest.approx(0.95)}


def test_the_cli_dedupes_refuses_contradictions_and_is_idempotent(capsys, toy_home):
    asked = run_cli(capsys, "query", BRIDGE_QUESTION, "--home", toy_home, "--json")
    result = json.loads(asked.stdout)
    qid, top = result["query_id"], result["passages"][0]["id"]
    base = ("feedback", "--query-id", qid, "--home", toy_home, "--json")
    many = [a for _ in range(500) for a in ("--accept", top)]
    first = run_cli(capsys, *base, *many)
    assert first.code == 0 and json.loads(first.stdout)["recorded"] == 1, first.stderr
    again = run_cli(capsys, *base, "--accept", top)
    assert json.loads(again.stdout) | {"concepts": []} == {
        "query_id": qid,
        "recorded": 0,
        "already_recorded": 1,
        "concepts": [],
    }
    both = run_cli(capsys, *base, "--accept", top, "--reject", top)
    error_line(both, 2, top, "both accepted and rejected", "judge each result once")
    events, _ = read_events(LanceStore.open(toy_home))
    assert [(e.result_id, e.kind) for e in events] == [(top, "accepted")]
