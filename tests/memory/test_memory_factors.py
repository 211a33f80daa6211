"""Feedback events and teleportation factors on a real LanceDB store in a tmp dir."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
import subprocess
import sys

import pytest

from qortex_core.errors import ConfigError, QueryError
from qortex_core.feedback.events import (
    FeedbackConfig,
    FeedbackEvent,
    QueryLog,
    ResultTrace,
    read_events,
    record_feedback,
)
from qortex_core.feedback.factors import (
    FactorCache,
    FactorConfig,
    extremes,
    fold,
    load_factors,
    update_factors,
)
from qortex_core.storage.store import LanceStore

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def ev(n: int, kind: str, *concepts: str, days: float = 0.0) -> FeedbackEvent:
    return FeedbackEvent(
        f"ev{n:04d}", "q", "p", kind, concepts, T0 + dt.timedelta(days=days, seconds=n)
    )


def test_fold_applies_steps_and_clamps():
    events = [
        ev(0, "accepted", "a"),
        ev(1, "accepted", "a"),
        ev(2, "rejected", "b"),
        ev(3, "partial", "c", "a"),
    ]
    out = fold(events)
    assert out["a"].factor == pytest.approx(1.23)
    assert out["a"].events == 3
    assert out["b"].factor == pytest.approx(0.95)
    assert out["c"].factor == pytest.approx(1.03)
    many = fold(
        [ev(i, "rejected", "x") for i in range(100)]
        + [ev(200 + i, "accepted", "y") for i in range(200)]
    )
    assert many["x"].factor == pytest.approx(0.1)
    assert many["y"].factor == pytest.approx(10.0)


def test_fold_is_order_independent_of_input_order_and_decays():
    events = [
        ev(i, k, "a")
        for i, k in enumerate(["accepted", "rejected", "accepted", "rejected", "partial"])
    ]
    assert fold(events)["a"].factor == pytest.approx(fold(list(reversed(events)))["a"].factor)
    cfg = FactorConfig(decay_half_life_days=1.0)
    late = fold([ev(0, "accepted", "a")], cfg, as_of=T0 + dt.timedelta(days=1))
    assert late["a"].factor == pytest.approx(1.05, abs=1e-4)


def test_config_rejects_bad_clamp():
    with pytest.raises(ConfigError):
        FactorConfig(lower=2.0)
    with pytest.raises(ConfigError):
        FactorConfig(rejected=1.5)


def test_extremes_split_boosted_and_suppressed():
    boosted, suppressed = extremes({"a": 2.0, "b": 0.5, "c": 1.0, "d": 0.2, "e": 3.0}, n=5)
    assert boosted == [("e", 3.0), ("a", 2.0)]
    assert suppressed == [("d", 0.2), ("b", 0.5)]


RECORD_AND_EXIT = """
import sys
from qortex_core.feedback.events import QueryLog, ResultTrace
from qortex_core.storage.store import LanceStore
QueryLog(LanceStore.open(sys.argv[1])).record(
    "q_1", "v1", [ResultTrace("p_a", "passage", ("c_x", "c_y")), ResultTrace("r_b", "rule", ("c_z",))])
"""


def test_feedback_resolves_concepts_from_another_process_log(tmp_path):
    # the query ran in a process that exited normally (as `qortex query` does): its pending log was written
    subprocess.run(
        [sys.executable, "-c", RECORD_AND_EXIT, str(tmp_path)],
        check=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    store = LanceStore.open(tmp_path)
    fresh = QueryLog(LanceStore.open(tmp_path))  # nothing in memory: must read the table
    events = record_feedback(store, fresh, "q_1", accepted=["p_a"], rejected=["r_b"])
    assert [(e.result_id, e.kind, e.concept_ids) for e in events] == [
        ("p_a", "accepted", ("c_x", "c_y")),
        ("r_b", "rejected", ("c_z",)),
    ]
    stored, version = read_events(LanceStore.open(tmp_path))
    assert {e.event_id for e in stored} == {e.event_id for e in events} and version >= 1
    with pytest.raises(QueryError, match="unknown query id"):
        record_feedback(store, fresh, "q_nope", accepted=["p_a"])
    with pytest.raises(QueryError, match="not returned"):
        record_feedback(store, fresh, "q_1", accepted=["p_other"])
    with pytest.raises(QueryError, match="no result ids"):
        record_feedback(store, fresh, "q_1")


def test_query_log_batches_and_flushes_before_lookup(tmp_path):
    store = LanceStore.open(tmp_path)
    log = QueryLog(store, FeedbackConfig(flush_every=3, flush_after_s=3600))
    for n in range(2):
        log.record(f"q_{n}", "v1", [ResultTrace("p_a", "passage", ("c_x",))])
    assert store.open_latest("query_log") is None  # pending, not yet committed
    log.record("q_2", "v1", [ResultTrace("p_a", "passage", ("c_x",))])
    assert store.open_latest("query_log").count_rows() == 3  # one commit for three queries
    log.record("q_3", "v1", [ResultTrace("p_b", "passage", ("c_y",))])
    other = QueryLog(store)
    with pytest.raises(QueryError):
        other.resolve("q_3")  # still pending in the first log's process
    assert log.flush() == 1 and other.resolve("q_3") == {"p_b": ("c_y",)}


def test_update_is_idempotent_and_watermarked(tmp_path):
    store = LanceStore.open(tmp_path)
    log = QueryLog(store)
    log.record("q_1", "v1", [ResultTrace("p_a", "passage", ("c_x",))])
    record_feedback(store, log, "q_1", rejected=["p_a"])
    first = update_factors(store)
    assert (
        not first.skipped
        and first.folded == 1
        and first.suppressed == [("c_x", pytest.approx(0.95))]
    )
    table_version = store.open_latest("teleportation_factors").version
    again = update_factors(LanceStore.open(tmp_path))
    assert again.skipped and store.open_latest("teleportation_factors").version == table_version
    assert load_factors(store)[0] == {"c_x": pytest.approx(0.95)}
    forced = update_factors(store, force=True)  # re-folding the same log gives the same factors
    assert not forced.skipped and load_factors(store)[0] == {"c_x": pytest.approx(0.95)}
    assert record_feedback(store, log, "q_1", rejected=["p_a"]) == []  # the same judgement again
    assert update_factors(store).skipped and load_factors(store)[0]["c_x"] == pytest.approx(0.95)
    log.record("q_2", "v1", [ResultTrace("p_a", "passage", ("c_x",))])
    record_feedback(store, log, "q_2", rejected=["p_a"])  # another query's judgement counts
    update_factors(store)
    assert load_factors(store)[0]["c_x"] == pytest.approx(0.95**2)


def test_factor_cache_sees_new_versions(tmp_path):
    store = LanceStore.open(tmp_path)
    cache = FactorCache(LanceStore.open(tmp_path), interval_s=0.0)
    assert cache.get() == ({}, 0)
    log = QueryLog(store)
    log.record("q_1", "v1", [ResultTrace("p_a", "passage", ("c_x",))])
    record_feedback(store, log, "q_1", accepted=["p_a"])
    update_factors(store)
    factors, version = cache.get()
    assert factors == {"c_x": pytest.approx(1.1)} and version > 0


def _append_many(home: str, worker: int, n: int) -> None:
    store = LanceStore.open(home)
    log = QueryLog(store)
    for k in range(n):  # n queries, each judged once (a repeated judgement would count once)
        qid = f"q_w{worker}_{k}"
        log.record(qid, "v1", [ResultTrace("p_a", "passage", ("c_shared", f"c_w{worker}"))])
        record_feedback(store, log, qid, accepted=["p_a"])


def test_appends_from_several_processes_are_all_kept(tmp_path):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w, 5)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    events, _ = read_events(LanceStore.open(tmp_path))
    assert len(events) == 15 and len({e.event_id for e in events}) == 15
    update_factors(LanceStore.open(tmp_path))
    factors, _ = load_factors(LanceStore.open(tmp_path))
    assert factors["c_shared"] == pytest.approx(1.0 + 15 * 0.1)
    assert all(factors[f"c_w{w}"] == pytest.approx(1.5) for w in range(3))


def test_query_log_retention_drops_only_old_traces(tmp_path):
    import pyarrow as pa

    from qortex_core.feedback.events import LOG_SCHEMA, now
    from qortex_core.storage.retention import prune_query_log

    store = LanceStore.open(tmp_path)
    old = now() - dt.timedelta(days=40)
    store.append(
        "query_log",
        pa.Table.from_pylist(
            [
                {
                    "query_id": "q_old",
                    "result_id": "p_a",
                    "result_kind": "passage",
                    "concept_ids": ["c_x"],
                    "snapshot": "v",
                    "ts": old,
                    "tenant": "default",
                }
            ],
            schema=LOG_SCHEMA,
        ),
    )
    log = QueryLog(store, FeedbackConfig(flush_every=1))
    log.record("q_new", "v", [ResultTrace("p_b", "passage", ("c_y",))])
    assert prune_query_log(tmp_path, days=30) == 1
    fresh = QueryLog(LanceStore.open(tmp_path))
    assert fresh.resolve("q_new") == {"p_b": ("c_y",)}
    with pytest.raises(QueryError):
        fresh.resolve("q_old")
