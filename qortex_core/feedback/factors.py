"""Learned teleportation factors: feedback events folded into one multiplier per concept.

The ``feedback_events`` table is the append-only source of truth; the
``teleportation_factors`` table is a materialised view of it. A fold replays
every event in (time, event id) order, so re-folding is idempotent by
construction and events appended before a crash are folded by the next run.
Each row carries the events-table version it was folded from (the watermark);
a fold whose watermark is already current writes nothing.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa

from qortex_core.errors import ConfigError
from qortex_core.feedback.events import FeedbackEvent, now, read_events
from qortex_core.storage.store import CONCEPTS, FACTORS, LanceStore

FACTOR_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("factor", pa.float64()),
        ("updated_at", pa.timestamp("us", tz="UTC")),
        ("events", pa.int64()),
        ("watermark", pa.int64()),
        ("events_total", pa.int64()),
    ]
)


@dataclass(frozen=True)
class FactorConfig:
    """How judgements move a concept's factor.

    Attributes:
        accepted: added per accepted result the concept was behind.
        rejected: multiplier per rejected result.
        partial: added per partially useful result.
        lower, upper: clamp range of every factor.
        decay_half_life_days: when set, factors relax toward 1.0 with this half-life.
    """

    accepted: float = 0.1
    rejected: float = 0.95
    partial: float = 0.03
    lower: float = 0.1
    upper: float = 10.0
    decay_half_life_days: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.lower <= 1.0 <= self.upper:
            raise ConfigError(
                "factor clamp must satisfy 0 < lower <= 1 <= upper, "
                f"got [{self.lower}, {self.upper}]"
            )
        if not 0 < self.rejected <= 1:
            raise ConfigError(f"rejected multiplier must be in (0, 1], got {self.rejected}")
        if self.decay_half_life_days is not None and self.decay_half_life_days <= 0:
            raise ConfigError("decay_half_life_days must be positive")


@dataclass(frozen=True)
class ConceptFactor:
    concept_id: str
    factor: float
    updated_at: dt.datetime
    events: int


@dataclass(frozen=True)
class FoldReport:
    """What one fold did.

    Attributes:
        folded: events replayed (all of them; 0 when skipped).
        concepts: concepts with a factor.
        watermark: feedback_events table version the factors reflect.
        skipped: the factors were already current, nothing was written.
        boosted, suppressed: the most boosted / suppressed (concept id, factor), strongest first.
    """

    folded: int
    concepts: int
    watermark: int
    skipped: bool
    boosted: list[tuple[str, float]] = field(default_factory=list)
    suppressed: list[tuple[str, float]] = field(default_factory=list)


def _decayed(
    factor: float, since: dt.datetime, until: dt.datetime, half_life_days: float | None
) -> float:
    if half_life_days is None or until <= since:
        return factor
    days = (until - since).total_seconds() / 86400.0
    return 1.0 + (factor - 1.0) * math.pow(0.5, days / half_life_days)


def apply(factor: float, kind: str, config: FactorConfig) -> float:
    """One judgement applied to one factor, clamped."""
    if kind == "accepted":
        factor += config.accepted
    elif kind == "rejected":
        factor *= config.rejected
    elif kind == "partial":
        factor += config.partial
    return min(config.upper, max(config.lower, factor))


def fold(
    events: Sequence[FeedbackEvent],
    config: FactorConfig = FactorConfig(),
    as_of: dt.datetime | None = None,
) -> dict[str, ConceptFactor]:
    """Replay ``events`` in (time, id) order into per-concept factors (a pure function)."""
    state: dict[str, ConceptFactor] = {}
    for e in sorted(events, key=lambda e: (e.ts, e.event_id)):
        for cid in dict.fromkeys(e.concept_ids):
            old = state.get(cid)
            base = (
                1.0
                if old is None
                else _decayed(old.factor, old.updated_at, e.ts, config.decay_half_life_days)
            )
            state[cid] = ConceptFactor(
                cid, apply(base, e.kind, config), e.ts, (old.events if old else 0) + 1
            )
    if as_of is not None and config.decay_half_life_days is not None:
        state = {
            c: ConceptFactor(
                c,
                _decayed(f.factor, f.updated_at, as_of, config.decay_half_life_days),
                f.updated_at,
                f.events,
            )
            for c, f in state.items()
        }
    return state


def extremes(
    factors: dict[str, float], n: int = 5
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The ``n`` most boosted (factor > 1) and most suppressed (factor < 1) concepts."""
    ranked = sorted(factors.items(), key=lambda kv: (-kv[1], kv[0]))
    boosted = [(c, f) for c, f in ranked if f > 1.0][:n]
    suppressed = [(c, f) for c, f in reversed(ranked) if f < 1.0][:n]
    return boosted, suppressed


def load_factors(store: LanceStore) -> tuple[dict[str, float], int]:
    """Concept id -> factor as committed now, and the events watermark they reflect."""
    table, _ = store.latest(FACTORS)
    if table.num_rows == 0:
        return {}, 0
    return dict(zip(table["concept_id"].to_pylist(), table["factor"].to_pylist())), int(
        max(table["watermark"].to_pylist())
    )


def update_factors(
    store: LanceStore, config: FactorConfig = FactorConfig(), force: bool = False, top: int = 5
) -> FoldReport:
    """Fold every feedback event into the ``teleportation_factors`` table (one atomic replace).

    Args:
        store: the tenant's store.
        config: judgement steps, clamp and decay.
        force: fold even when the watermark shows nothing new.
        top: how many boosted / suppressed concepts to report.
    """
    events, version = read_events(store)
    current, watermark = load_factors(store)
    decays = config.decay_half_life_days is not None
    if not force and not decays and version == watermark:
        return FoldReport(0, len(current), watermark, True, *extremes(current, top))
    folded = fold(events, config, as_of=now())
    rows = pa.Table.from_pylist(
        [
            {
                "concept_id": f.concept_id,
                "factor": f.factor,
                "updated_at": f.updated_at,
                "events": f.events,
                "watermark": version,
                "events_total": len(events),
            }
            for f in sorted(folded.values(), key=lambda f: f.concept_id)
        ],
        schema=FACTOR_SCHEMA,
    )
    _, latest_mark = load_factors(store)
    if latest_mark > version and not force:  # a concurrent fold already wrote newer factors
        return FoldReport(0, len(current), latest_mark, True, *extremes(current, top))
    store.replace(FACTORS, rows)
    values = {c: f.factor for c, f in folded.items()}
    return FoldReport(len(events), len(values), version, False, *extremes(values, top))


def concept_names(store: LanceStore, concept_ids: Sequence[str]) -> dict[str, str]:
    """Concept id -> name for display (ids without a stored concept map to themselves)."""
    rows = store.read_where(CONCEPTS, "id", list(concept_ids))
    names = dict(zip(rows["id"].to_pylist(), rows["name"].to_pylist())) if rows.num_rows else {}
    return {c: names.get(c, c) for c in concept_ids}


@dataclass
class FactorCache:
    """Factors for a long-lived retriever, re-read when the table changes.

    The table version is checked at most every ``interval_s`` seconds, so the
    query path costs one clock read between checks.
    """

    store: LanceStore
    interval_s: float = 1.0
    factors: dict[str, float] = field(default_factory=dict)
    version: int = -1
    checked: float = field(default=-math.inf)

    def get(self) -> tuple[dict[str, float], int]:
        """Current factors and the factors-table version they came from."""
        clock = time.monotonic()
        if clock - self.checked < self.interval_s:
            return self.factors, self.version
        self.checked = clock
        table = self.store.open_latest(FACTORS)
        version = int(table.version) if table is not None else 0
        if version != self.version:
            rows = table.to_arrow() if table is not None else pa.table({})
            self.factors = (
                dict(zip(rows["concept_id"].to_pylist(), rows["factor"].to_pylist()))
                if rows.num_rows
                else {}
            )
            self.version = version
        return self.factors, self.version
