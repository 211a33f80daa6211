"""The time model folded from the memories table: when each written record was true.

Every record is true from its event time (``valid_from``; its first write when it has none)
until the first later record of its chain that states another value (``valid_until``,
``superseded_by``); chains are the records joined by ``supersede`` link rows
(:mod:`qortex_core.memory.supersede`). The fold reads only stored rows, so every process that
has read the same rows computes the same timeline, whatever order it read them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    """``Validity`` of every live written record that some later record superseded, and the
    event time of every live record."""

    closed: dict[str, Validity] = field(default_factory=dict)
    starts: dict[str, str] = field(default_factory=dict)

    def validity(self, rid: str) -> Validity:
        """The validity of record ``rid`` (open-ended when nothing superseded it)."""
        return self.closed.get(rid) or Validity(self.starts.get(rid))

    def predecessors(self, rid: str) -> list[str]:
        """Records that ``rid`` superseded, oldest first."""
        return sorted((r for r, v in self.closed.items() if v.superseded_by == rid),
                      key=lambda r: (self.starts.get(r, ""), r))  # fmt: skip

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


def _chains(state, live: set[str]) -> list[list[str]]:
    """Linked live records grouped (union-find over the link rows)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for rid, row in state.current.items():
        if row["op"] != LINK_OP or not row["target"]:
            continue
        a, _, b = row["target"].partition(" ")
        if a in live and b in live:
            parent.setdefault(a, a)
            parent.setdefault(b, b)
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for rid in parent:
        groups.setdefault(root(rid), []).append(rid)
    return [g for g in groups.values() if len(g) > 1]


def fold_timeline(state) -> Timeline:
    """The timeline of a memory state (see the module docstring)."""
    live = {r for r in state.live_ids}
    starts = {r: _start(state, r) for r in live}
    closed: dict[str, Validity] = {}
    for chain in _chains(state, live):
        chain.sort(key=lambda r: (starts[r], r))
        said = {r: parse(state.current[r]["text"]) for r in chain}
        for i, rid in enumerate(chain):
            for later in chain[i + 1 :]:
                if starts[later] > starts[rid] and not same_value(said[later], said[rid]):
                    closed[rid] = Validity(starts[rid], starts[later], later)
                    break
    return Timeline(closed, starts)


class TimelineCache:
    """The timeline of one state, folded again only when the state changed."""

    def __init__(self) -> None:
        self._at: tuple[int, int] | None = None
        self._timeline = Timeline()

    def of(self, state) -> Timeline:
        key = (id(state), state.generation)
        if self._at != key:
            self._timeline, self._at = fold_timeline(state), key
        return self._timeline
