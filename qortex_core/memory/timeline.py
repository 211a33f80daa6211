"""The time model folded from the memories table: when each written record was true.

Every record is true from its event time (``valid_from``; its first write when it has none)
until the first later record of its chain that states another value (``valid_until``,
``superseded_by``); chains are the records joined by ``supersede`` link rows
(:mod:`qortex_core.memory.supersede`). The fold reads only stored rows, so every process that
has read the same rows computes the same timeline, whatever order it read them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from qortex_core.memory.statements import parse, same_value

LINK_OP = "supersede"


@dataclass(frozen=True)
class Validity:
    """When one record was true: from ``valid_from`` until ``valid_until`` (None: still)."""

    valid_from: str | None
    valid_until: str | None = None
    superseded_by: str | None = None


@dataclass
class Timeline:
    """``Validity`` of every live written record that some later record superseded; the event
    time of any live record is read from ``state`` when asked."""

    closed: dict[str, Validity] = field(default_factory=dict)
    state: Any = None
    _starts: dict[str, str] | None = None

    def start(self, rid: str) -> str | None:
        """The event time of live record ``rid`` (None: not live)."""
        state = self.state
        return _start(state, rid) if state is not None and state.is_live(rid) else None

    @property
    def starts(self) -> dict[str, str]:
        """The event time of every live record (read once, when first asked)."""
        if self._starts is None:
            live = self.state.live_ids if self.state is not None else []
            self._starts = {r: _start(self.state, r) for r in live}
        return self._starts

    def validity(self, rid: str) -> Validity:
        """The validity of record ``rid`` (open-ended when nothing superseded it)."""
        return self.closed.get(rid) or Validity(self.start(rid))

    def predecessors(self, rid: str) -> list[str]:
        """Records that ``rid`` superseded, oldest first."""
        return sorted((r for r, v in self.closed.items() if v.superseded_by == rid),
                      key=lambda r: (self.start(r) or "", r))  # fmt: skip

    def superseded(self) -> frozenset[str]:
        """Records some later record superseded."""
        return frozenset(self.closed)

    def hidden(self, as_of: str | None, include_superseded: bool = False) -> frozenset[str]:
        """Records a query must not return: superseded ones now (unless
        ``include_superseded``), or at ``as_of`` those not yet or no longer true then."""
        if as_of is None:
            return frozenset() if include_superseded else self.superseded()
        later = {r for r, t in self.starts.items() if t > as_of}
        if not include_superseded:
            later |= {r for r, v in self.closed.items() if v.valid_until and v.valid_until <= as_of}
        return frozenset(later)


def _start(state, rid: str) -> str:
    row = state.current[rid]
    return row["time"] or _iso_second(state.first_created.get(rid, row["created_at"]))


def _iso_second(created_at: str) -> str:
    """A write time (``...T09:30:00.123456+00:00``) in the event-time form ``...T09:30:00Z``."""
    return created_at[:19] + "Z"


def _chains(state, links) -> list[list[str]]:
    """Linked live records grouped (union-find over the link pairs)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for a, b in links:
        if state.is_live(a) and state.is_live(b):
            parent.setdefault(a, a)
            parent.setdefault(b, b)
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for rid in parent:
        groups.setdefault(root(rid), []).append(rid)
    return [g for g in groups.values() if len(g) > 1]


def link_pairs(state) -> list[tuple[str, str]]:
    """The record pairs of every ``supersede`` row of ``state``."""
    return [p for row in state.current.values() if (p := _pair(row)) is not None]


def _pair(row: dict) -> tuple[str, str] | None:
    if row["op"] != LINK_OP or not row["target"]:
        return None
    a, _, b = row["target"].partition(" ")
    return a, b


@lru_cache(maxsize=1 << 16)
def _said(text: str):
    return parse(text)


def fold_timeline(state, links=None) -> Timeline:
    """The timeline of a memory state (see the module docstring); ``links``: its link pairs
    (None: read from the state)."""
    timeline = Timeline(state=state)
    for chain in _chains(state, link_pairs(state) if links is None else links):
        starts = {r: _start(state, r) for r in chain}
        chain.sort(key=lambda r: (starts[r], r))
        said = {r: _said(state.current[r]["text"]) for r in chain}
        for i, rid in enumerate(chain):
            for later in chain[i + 1 :]:
                if starts[later] > starts[rid] and not same_value(said[later], said[rid]):
                    timeline.closed[rid] = Validity(starts[rid], starts[later], later)
                    break
    return timeline


class TimelineCache:
    """The timeline of one state, folded again only when the state changed, from the link
    rows gathered as they arrive (a write reads only the rows it added)."""

    def __init__(self) -> None:
        self._at: tuple[int, int] | None = None
        self._timeline = Timeline()
        self._links: dict[str, tuple[str, str]] = {}  # link row id -> its pair
        self._seen = (0, 0)  # (id of the state, its rows absorbed)

    def of(self, state) -> Timeline:
        key = (id(state), state.generation)
        if self._at != key:
            if self._seen[0] != id(state):
                self._links, self._seen = {}, (id(state), 0)
            changed, count = state.changed_since(self._seen[1])
            self._seen = (id(state), count)
            for rid in changed:
                pair = _pair(state.current[rid])
                if pair is None:
                    self._links.pop(rid, None)
                else:
                    self._links[rid] = pair
            self._timeline, self._at = fold_timeline(state, list(self._links.values())), key
        return self._timeline
