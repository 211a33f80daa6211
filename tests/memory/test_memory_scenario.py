"""The memory loop end to end on a real ingested corpus: feedback moves rankings, durably."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from qortex_core.errors import QueryError
from qortex_core.feedback.events import read_events
from qortex_core.feedback.factors import load_factors, update_factors
from qortex_core.feedback.learned import LearnedFeedbackConfig
from qortex_core.query.retriever import RetrievalConfig, Retriever
from qortex_core.storage.store import LanceStore

sys.path.insert(0, str(Path(__file__).parent))
from memory_corpus import corpus, ingest  # noqa: E402

QUERY = "Who services the Orion Pump?"
LIVE = LearnedFeedbackConfig(factor_refresh_s=0.0)  # check the factors table on every query
WALK = RetrievalConfig(dense_first=False)  # rank by the walk alone: what the factors move


@pytest.fixture(scope="module")
def home(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("memory_home")
    ingest(path, corpus(), embedder)
    return path


def ranking(retriever: Retriever) -> list[str]:
    return [h.id for h in retriever.query(QUERY, top_k=9, mode="hipporag").passages]


def judge(retriever: Retriever, times: int, **kinds: str) -> None:
    """Ask the query ``times`` times, judging the given passage ids each time."""
    for _ in range(times):
        result = retriever.query(QUERY, top_k=9, mode="hipporag")
        retriever.feedback(result.query_id, **{k: [v] for k, v in kinds.items()})


def test_rejection_moves_down_acceptance_moves_up_and_factors_survive_restart(home, embedder):
    live = Retriever.open(home, embedder=embedder, memory=LIVE, config=WALK)
    hits = live.query(QUERY, top_k=9, mode="hipporag").passages
    before = [h.id for h in hits]
    top = before[0]
    # the lowest hit that came through a concept at most one better hit came through: accepting it can lift it
    low = next(
        h.id
        for n, h in reversed(list(enumerate(hits)))
        if n > 1 and any(sum(seed in above.seeds for above in hits[:n]) <= 1 for seed in h.seeds)
    )

    judge(live, 30, rejected=top)
    update_factors(LanceStore.open(home))  # as `qortex factors update` would, from another handle
    after_reject = ranking(live)  # the same retriever sees the new factors: no restart
    assert after_reject.index(top) > 0
    first = live.query(QUERY, top_k=9, mode="hipporag")
    assert first.factors_version > 0
    assert next(h for h in first.passages if h.id == top).breakdown["preference"] < 0.5

    judge(live, 20, accepted=low)
    live.update_factors()
    after_accept = ranking(live)
    assert after_accept.index(low) < after_reject.index(low)

    restarted = Retriever.open(
        home, embedder=embedder, config=WALK
    )  # a new retriever (or process) reads the table
    assert ranking(restarted) == after_accept
    factors, watermark = load_factors(LanceStore.open(home))
    assert watermark > 0 and all(0.1 <= f <= 10 for f in factors.values())
    assert any(factors.get(c, 1.0) < 1.0 for c in hits[0].concept_ids)
    assert any(factors.get(c, 1.0) > 1.0 for c in next(h for h in hits if h.id == low).concept_ids)


def test_dense_first_passage_yields_to_rejection(tmp_path, embedder):
    """Default ranking lifts the best text passage (dense + BM25, the ``text`` mode's top) to
    first place, unless feedback judged it down."""
    home = tmp_path / "home"
    ingest(home, corpus(), embedder)
    r = Retriever.open(home, embedder=embedder, memory=LIVE)
    dense_top = r.query(QUERY, top_k=1, mode="text").passages[0].id
    assert r.query(QUERY, top_k=9, mode="hipporag").passages[0].id == dense_top
    judge(r, 30, rejected=dense_top)
    r.update_factors()
    after = r.query(QUERY, top_k=9, mode="hipporag")
    assert after.passages[0].id != dense_top
    assert next(h for h in after.passages if h.id == dense_top).breakdown["preference"] < 0.5
    walk = Retriever.open(home, embedder=embedder, config=WALK).query(
        QUERY, top_k=9, mode="hipporag"
    )
    assert [h.id for h in after.passages] == [
        h.id for h in walk.passages
    ]  # nothing else is lifted in its place


def test_feedback_errors_are_typed(home, embedder):
    r = Retriever.open(home, embedder=embedder)
    result = r.query(QUERY, top_k=3, mode="hipporag")
    with pytest.raises(QueryError, match="not returned"):
        r.feedback(result.query_id, accepted=["p_not_a_result"])
    with pytest.raises(QueryError, match="unknown query id"):
        r.feedback("q_0000000000000000", accepted=[result.passages[0].id])


def test_rules_ranked_by_concept_ppr_and_domains_filter_results(home, embedder):
    r = Retriever.open(home, embedder=embedder)
    result = r.query(
        "What should operators never do with the Orion Pump?", top_k=5, mode="hipporag"
    )
    assert result.rules and "Orion Pump" in result.rules[0].text
    assert "Orion Pump" in result.rules[0].concepts
    scores = [rule.score for rule in result.rules]
    assert scores == sorted(scores, reverse=True)
    # nothing in the kitchen is about the pump: by default the answer is "no answer" ...
    assert r.query(QUERY, top_k=5, mode="hipporag", domains=["kitchen"]).no_answer
    # ... and without abstention the walk from the pump still ranks the kitchen passages
    kitchen = r.query(QUERY, top_k=5, mode="hipporag", domains=["kitchen"], min_relevance=0)
    assert kitchen.passages and all(h.domain == "kitchen" for h in kitchen.passages)
    assert all("Orion" not in rule.text and "Vega" not in rule.text for rule in kitchen.rules)
    assert kitchen.seeds and any(
        "Orion" in s.name for s in kitchen.seeds
    )  # the walk still starts at the pump


def test_modes_and_profiles(home, embedder):
    r = Retriever.open(home, embedder=embedder)
    hybrid = r.query(QUERY, top_k=5, mode="hybrid")
    assert hybrid.mode == "hybrid" and 0.0 <= hybrid.confidence <= 1.0
    assert all({"dense", "ppr", "final"} <= set(h.breakdown) for h in hybrid.passages)
    auto = r.query(QUERY, top_k=5)
    assert auto.mode in ("hipporag", "hybrid", "dense") and auto.route.startswith("auto:")
    plain = r.query(QUERY, top_k=5, mode="hipporag")
    assert all(
        h.score == pytest.approx(h.breakdown["final"]) == pytest.approx(h.breakdown["relevance"])
        for h in plain.passages
    )  # default profile: relevance only
    balanced = r.query(QUERY, top_k=5, mode="hipporag", profile="balanced")
    for h in balanced.passages:
        b = h.breakdown
        expected = (
            0.7 * b["relevance"] + 0.1 * b["recency"] + 0.1 * b["salience"] + 0.1 * b["preference"]
        )
        assert h.score == pytest.approx(expected, abs=1e-5) and b["final"] == pytest.approx(h.score)
    (Path(home) / "profiles.json").write_text('{"salient": {"relevance": 0.0001, "salience": 1.0}}')
    try:
        saliences = [
            h.breakdown["salience"]
            for h in r.query(QUERY, top_k=5, mode="hipporag", profile="salient").passages
        ]
    finally:
        (Path(home) / "profiles.json").unlink()
    assert saliences == sorted(saliences, reverse=True)


CHILD = textwrap.dedent("""
    import sys, time
    from qortex_core.feedback.events import QueryLog, ResultTrace, record_feedback
    from qortex_core.storage.store import LanceStore
    store = LanceStore.open(sys.argv[1])
    log = QueryLog(store)
    for n in range(int(sys.argv[2])):
        log.record(f"q_crash{n}", "v", [ResultTrace("p_x", "passage", ("c_crash",))])
        record_feedback(store, log, f"q_crash{n}", rejected=["p_x"])
        print("appended", n + 1, flush=True)
    time.sleep(600)  # killed here: between append and fold
""")


def test_events_appended_before_a_crash_are_all_folded(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), "6"],
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    try:
        lines = [proc.stdout.readline().strip() for _ in range(6)]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert lines[-1] == "appended 6" and proc.returncode == -signal.SIGKILL
    store = LanceStore.open(tmp_path)
    assert load_factors(store) == ({}, 0)  # nothing folded before the crash
    report = update_factors(store)
    events, version = read_events(store)
    assert report.folded == len(events) == 6 and report.watermark == version
    assert load_factors(store)[0]["c_crash"] == pytest.approx(0.95**6)
    assert update_factors(store).skipped
