"""What a stage consumed, by the versions of its upstream tables: a stage whose upstream tables
have not been written since it last finished has nothing to do, and knows it without reading
them (an unchanged run costs a few version look-ups, not a scan of the corpus).

A table's mark is its Lance version and the time that version was committed (a table dropped
and made again restarts its versions, never its commit times).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from qortex_core.storage import ids
from qortex_core.storage.store import LanceStore

INPUTS_STATE = "embeddings_inputs"  # stage-state row: the embedding stage's upstream marks


def table_mark(store: LanceStore, name: str) -> str:
    """``name``'s latest version and its commit time, as committed by any process ("absent" when
    the table does not exist)."""
    table = store.open_latest(name)
    if table is None:
        return "absent"
    latest = max(table.list_versions(), key=lambda v: v["version"])
    return f"{latest['version']}@{latest['timestamp'].isoformat()}"


def upstream_marks(store: LanceStore, tables: tuple[str, ...], *parts: str) -> str:
    """A digest of ``tables``' marks and the stage's own settings ``parts``."""
    return ids.digest(*(table_mark(store, t) for t in tables), *parts, size=16)


def remembered(
    store: LanceStore,
    name: str,
    tables: tuple[str, ...],
    compute: Callable[[], Any],
    *parts: str,
    keep: Callable[[Any], bool] | None = None,
) -> Any:
    """``compute()`` (a JSON value), or what it returned last time when ``tables`` have not been
    written since and ``parts`` are the same (a check over the whole corpus, say, is not run
    again on an unchanged run). ``keep``: which values are remembered (default: all); a value
    it refuses is computed again next time."""
    marks = upstream_marks(store, tables, *parts)
    stored = store.stage_digest(f"memo:{name}")
    if stored is not None:
        seen, _, value = stored.partition(" ")
        if seen == marks:
            return json.loads(value)
    value = compute()
    if keep is None or keep(value):
        remember(store, name, marks, value)
    return json.loads(json.dumps(value))  # the same shape as a remembered one (lists)


def remember(store: LanceStore, name: str, marks: str, value: Any) -> None:
    """Record ``value`` as what :func:`remembered` ``name`` gives while the marks are ``marks``
    (:func:`upstream_marks`, taken before the value's inputs were read: a write in between
    changes the marks, and the value is computed again)."""
    store.set_stage_digest(f"memo:{name}", f"{marks} {json.dumps(value)}")
