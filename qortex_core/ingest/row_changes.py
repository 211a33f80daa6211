"""What a stage changed in a table from one version to the next: the ids it wrote and
removed, so that a later stage can take every other row from what it built before instead of
reading the whole table again.

Links are written by the embedding stage for the facts table (read by
:mod:`.snapshot_facts`), and by the chunk and extraction stages for the chunks and
extractions tables, whose ids are chunk ids either way (read by the embedding stage, which then
compares only those chunks with its record).

The record is a short chain of links (``from`` version, ``to`` version, ids) in the store's
stage state, newest last. Any other write of the table (a full rebuild, a purge, ``qortex
snapshots prune`` compacting it) leaves a version no link starts from, so the chain from an
older version breaks and the reader reads the table in full. A full rebuild also clears the
chain (versions of a table replaced by hand could otherwise meet an old link).
"""

from __future__ import annotations

import json

from qortex_core.storage.store import LanceStore

KEEP = 8  # links kept: a snapshot normally follows the run before it
MAX_IDS = 50_000  # a link with more ids is not recorded (a change that large is read in full)


def version(store: LanceStore, name: str) -> int:
    """Table ``name``'s latest version as committed by any process (0: no table)."""
    table = store.open_latest(name)
    return int(table.version) if table is not None else 0


def _state(name: str) -> str:
    return f"row_changes:{name}"


def _links(store: LanceStore, name: str) -> list[dict]:
    raw = store.stage_digest(_state(name))
    try:
        links = json.loads(raw) if raw else []
    except ValueError:
        return []
    return links if isinstance(links, list) else []


def record(
    store: LanceStore, name: str, before: int, after: int, written: list[str], removed: list[str]
) -> None:
    """Record that table ``name`` went from version ``before`` to ``after`` by writing the rows
    ``written`` and removing ``removed`` (nothing else changed in between)."""
    if after == before:
        return
    if len(written) + len(removed) > MAX_IDS:
        clear(store, name)
        return
    link = {"from": before, "to": after, "ids": sorted({*written, *removed})}
    store.set_stage_digest(_state(name), json.dumps([*_links(store, name)[-(KEEP - 1) :], link]))


def record_since(
    store: LanceStore, name: str, before: int, written: list[str], removed: list[str]
) -> None:
    """:func:`record` from version ``before`` to the table's latest (:func:`version`)."""
    record(store, name, before, version(store, name), written, removed)


def clear(store: LanceStore, name: str) -> None:
    """Forget the chain of ``name`` (its versions no longer follow the links)."""
    if _links(store, name):
        store.set_stage_digest(_state(name), "[]")


def touched(store: LanceStore, name: str, since: int, now: int) -> list[str] | None:
    """The ids of every row of ``name`` written or removed from version ``since`` to ``now``
    (sorted), or None when the links do not cover those versions one after another."""
    if since == now:
        return []
    ids: set[str] = set()
    at: int | None = since
    for link in _links(store, name):
        if link.get("from") == at:
            ids.update(link.get("ids") or [])
            at = link.get("to")
    return sorted(ids) if at == now else None
