"""Conversational structure: passages that are consecutive items of one dated source.

A passage whose ``doc_id`` reads ``source#item`` (a turn of a conversation, a message of a
thread: ``conv-26#D3:7``) and that has an event time is an item of the sequence ``source``
(within its domain). Items are ordered by event time, then by item name with digit runs
compared as numbers (``D3:7`` before ``D3:10``); two items are neighbours when at most
``window`` places apart and at most ``gap_s`` seconds apart (a later session of the same
conversation is not the same sitting). The graph links neighbours passage to passage with
weight ``weight / distance``, so the walk can move from the turn the query names to the turns
around it (the reply, the question it answers).

Written memories (documents ``memory:<record id>``) with an event time are items of one
sequence per domain: an agent's memories of one sitting (written within ``gap_s`` of each
other) are each other's context, ordered by their event times.

Passages without ``#`` in their document id that are no memory, or without a time, belong to
no sequence: an encyclopedia corpus gets no edge and its graph is unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_core.errors import ConfigError
from qortex_core.storage import times

_DIGITS = re.compile(r"(\d+)")
MEMORY_DOCS = "memory:"  # documents of written memories (memory.records.DOC_PREFIX; tested)


@dataclass(frozen=True)
class SequenceConfig:
    """Temporal-adjacency edges between items of one source.

    Attributes:
        weight: edge weight between direct neighbours (distance d: ``weight / d``; 0: off).
        window: neighbours up to this many places apart are linked.
        gap_s: neighbours further apart in event time than this many seconds are not linked.
    """

    weight: float = 2.0
    window: int = 3
    gap_s: float = 3600.0

    def __post_init__(self) -> None:
        if not self.weight >= 0 or not self.gap_s >= 0:
            raise ConfigError("sequence weight and gap must be >= 0")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ConfigError(f"sequence window must be an integer >= 1, got {self.window!r}")


def _natural(name: str) -> tuple:
    """``D3:10`` as ("D", 3, ":", 10, ""): digit runs compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def source_item(doc_id: str) -> tuple[str, str] | None:
    """(source, item) of an item of a sequence (``conv-26#D3:7``, ``memory:<id>``), else None."""
    if doc_id.startswith(MEMORY_DOCS):
        return MEMORY_DOCS, doc_id[len(MEMORY_DOCS) :]
    source, sep, item = doc_id.rpartition("#")
    return (source, item) if sep and source and item else None


def _members(
    doc_ids: Sequence[str], when: np.ndarray, domains: Sequence[str]
) -> dict[tuple[str, str], list[int]]:
    """Passage indices of each (domain, source) sequence, in order (time, item)."""
    groups: dict[tuple[str, str], list[int]] = {}
    items: dict[int, str] = {}
    for i, doc in enumerate(doc_ids):
        found = source_item(doc or "")
        if found is not None and np.isfinite(when[i]):
            groups.setdefault((domains[i], found[0]), []).append(i)
            items[i] = found[1]
    for members in groups.values():
        members.sort(key=lambda i: (when[i], _natural(items[i])))
    return groups


def sequence_pairs(
    doc_ids: Sequence[str],
    event_times: Sequence[str | None],
    domains: Sequence[str],
    config: SequenceConfig = SequenceConfig(),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Neighbour pairs among ``n`` passages: (a, b, distance) arrays, a < b in sequence order.

    Args:
        doc_ids, event_times, domains: per passage (``event_times`` ISO 8601 or None).

    Returns:
        (m,) int64 passage indices ``a`` and ``b`` and (m,) int64 distances (1 = adjacent).
    """
    when = times.epoch_array(event_times)  # (n,) epoch seconds, NaN without a time
    a_out: list[int] = []
    b_out: list[int] = []
    d_out: list[int] = []
    if config.weight <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    for members in _members(doc_ids, when, domains).values():
        for pos, a in enumerate(members):
            for d in range(1, config.window + 1):
                if pos + d >= len(members):
                    break
                b = members[pos + d]
                if when[b] - when[a] > config.gap_s:
                    break
                a_out.append(a)
                b_out.append(b)
                d_out.append(d)
    return np.array(a_out, np.int64), np.array(b_out, np.int64), np.array(d_out, np.int64)


def sequence_weights(distance: np.ndarray, config: SequenceConfig = SequenceConfig()) -> np.ndarray:
    """(m,) float32 edge weight of each pair: ``weight / distance``."""
    return (np.float32(config.weight) / np.maximum(distance, 1)).astype(np.float32)
