"""The passages' BM25 index (:mod:`.fulltext`) brought up to date beside the stages that follow
the embedding stage, in a process that runs those stages one after another.

New passages are indexed as a segment of their own (milliseconds), but a sync still reads
the held ids, and every :data:`~.fulltext.MAX_SEGMENTS` syncs, or after deletes, it merges or
rebuilds the whole index (2-4 s at 100k passages); the snapshot stage needs its version only
when it writes the manifest. The embedding stage starts the sync on a thread of its own as
soon as the passages are written (:func:`start`); the snapshot stage does not plan a sync of
its own while one is pending, and waits for it only when it needs the version
(:func:`synced`), then plans again (normally nothing is left to write). One sync per LanceDB
database runs at a time (one writer per table): a second waits for the first.

The thread is not a daemon: a process that exits first waits for it. A sync that fails here is
logged and left to the snapshot stage, which syncs again and reports what fails.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

import pyarrow as pa

from qortex_core.storage import fulltext

_log = logging.getLogger(__name__)
_RUNNING: dict[str, threading.Thread] = {}  # database URI -> the last sync started beside
_LOCK = threading.Lock()


def _key(db) -> str:
    return str(db.uri)


def _run(db, passages: Callable[[], pa.Table], before: threading.Thread | None) -> None:
    if before is not None:
        before.join()  # one writer of the table at a time
    try:
        fulltext.sync(db, passages())
    except Exception as exc:  # the snapshot stage syncs again and reports what fails
        _log.warning(
            "passage_text: the sync beside the stages failed (%s); the snapshot syncs", exc
        )


def start(db, passages: Callable[[], pa.Table]) -> None:
    """Sync ``passage_text`` of ``db`` with the passages ``passages()`` reads, on a new thread
    (after any sync started before it)."""
    with _LOCK:
        before = _RUNNING.get(_key(db))
        thread = threading.Thread(
            target=_run, args=(db, passages, before), name="passage-text-beside"
        )
        _RUNNING[_key(db)] = thread
        thread.start()


def pending(db) -> bool:
    """Whether a sync was started beside on ``db`` and not waited for yet."""
    with _LOCK:
        return _key(db) in _RUNNING


def wait(db) -> None:
    """Wait for the syncs started beside on ``db`` (none: at once)."""
    with _LOCK:
        thread = _RUNNING.get(_key(db))
    if thread is None:
        return
    thread.join()
    with _LOCK:
        if _RUNNING.get(_key(db)) is thread:
            del _RUNNING[_key(db)]


def synced(db, passages: pa.Table, plan: fulltext.SyncPlan | None) -> int:
    """The index's version once it holds exactly ``passages``: ``plan`` applied, or (None: a
    sync was pending beside) that sync waited for, then a plan made and applied."""
    if plan is None:
        wait(db)
        plan = fulltext.plan_sync(db, passages)
    return fulltext.apply_sync(db, plan)
