"""Snapshot retention: list versions, prune old ones (never LATEST), and optimize LanceDB tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from qortex_core.errors import ConfigError
from qortex_core.jsonable import JsonRecord
from qortex_core.storage import fulltext
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import QUERY_LOG, LanceStore


@dataclass(frozen=True)
class SnapshotInfo(JsonRecord):
    name: str
    version: int
    created: str
    latest: bool
    counts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PruneReport(JsonRecord):
    kept: list[str]
    removed: list[str]
    optimized: dict[str, int]  # table -> version after optimize
    query_log_removed: int = (
        0  # query traces older than the log retention (feedback events are never pruned)
    )


def default_keep() -> int:
    """The retention setting: ``$QORTEX_SNAPSHOT_KEEP`` or 5.

    Raises:
        ConfigError: the variable is not a positive integer.
    """
    from qortex_core.settings import get_settings

    return get_settings().snapshot_keep


def query_log_days() -> int:
    """Days of query traces kept for resolving feedback: ``$QORTEX_QUERY_LOG_DAYS`` or 30.

    Raises:
        ConfigError: the variable is not a positive integer.
    """
    from qortex_core.settings import get_settings

    return get_settings().query_log_days


def prune_query_log(home: str | Path, days: int) -> int:
    """Delete query traces older than ``days`` (feedback on those queries is then refused); rows
    removed."""
    table = LanceStore.open(home).open_latest(QUERY_LOG)
    if table is None:
        return 0
    before = table.count_rows()
    cut = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)).strftime("%Y-%m-%d %H:%M:%S")
    table.delete(f"ts < timestamp '{cut}'")
    return before - table.count_rows()


def list_snapshots(home: str | Path) -> list[SnapshotInfo]:
    """Every published snapshot, oldest first, with its manifest summary."""
    try:
        latest = snap.latest_name(home)
    except snap.SnapshotError:
        latest = ""
    out = []
    for name in snap.list_versions(home):
        try:
            manifest = json.loads((snap.snapshots_dir(home) / name / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            manifest = {}
        out.append(
            SnapshotInfo(
                name,
                int(name[1:7]),
                str(manifest.get("created", "")),
                name == latest,
                dict(manifest.get("counts", {})),
            )
        )
    return out


def prune_snapshots(
    home: str | Path, keep: int, optimize: bool = True, log_days: int | None = None
) -> PruneReport:
    """Delete all but the ``keep`` newest snapshot directories (LATEST is always kept), then
    optimize.

    A directory is first renamed out of the version namespace, so a reader never
    resolves a half-deleted snapshot. Optimizing compacts every LanceDB table and
    drops table versions older than the oldest kept snapshot.

    Raises:
        ConfigError: ``keep`` is below 1.
    """
    if keep < 1:
        raise ConfigError(f"--keep must be at least 1, got {keep}")
    infos = list_snapshots(home)
    removed = _delete(home, _beyond(infos, keep))
    kept = {i.name for i in infos} - set(removed)
    oldest = min((i.created for i in infos if i.name in kept and i.created), default="")
    log_removed = prune_query_log(home, log_days if log_days is not None else query_log_days())
    optimized = optimize_tables(home, oldest) if optimize else {}
    return PruneReport(sorted(kept), removed, optimized, log_removed)


def _beyond(infos: list[SnapshotInfo], keep: int) -> list[str]:
    """The snapshots (oldest first) past the ``keep`` newest, ``LATEST`` never among them."""
    kept = {i.name for i in infos[-keep:]} | {i.name for i in infos if i.latest}
    return [i.name for i in infos if i.name not in kept]


def _delete(home: str | Path, names: list[str]) -> list[str]:
    """Delete snapshot folders ``names``, each first renamed out of the version namespace so a
    reader never resolves a half-deleted snapshot; the names deleted."""
    root = snap.snapshots_dir(home)
    for name in names:
        trash = root / f".trash-{uuid.uuid4().hex}"
        os.rename(root / name, trash)
        shutil.rmtree(trash, ignore_errors=True)
    return names


def retire_snapshots(home: str | Path, keep: int) -> list[str]:
    """After a publish: delete all but the ``keep`` newest snapshot folders (never ``LATEST``),
    and nothing else (no table is touched, unlike :func:`prune_snapshots`); the names deleted.

    A retriever moves to ``LATEST`` when it changes (``Memory.retriever``), and one that still
    has an older snapshot open keeps its mapped files (deleting a file unlinks only its name).
    """
    if keep < 1:
        raise ConfigError(f"snapshots to keep must be at least 1, got {keep}")
    return _delete(home, _beyond(list_snapshots(home), keep))


def optimize_tables(home: str | Path, keep_since_iso: str = "") -> dict[str, int]:
    """Compact every LanceDB table under ``home`` and clean versions older than
    ``keep_since_iso``."""
    store = LanceStore.open(home)
    age = dt.timedelta(days=7)
    if keep_since_iso:
        since = dt.datetime.fromisoformat(keep_since_iso)
        age = max(dt.datetime.now(dt.timezone.utc) - since, dt.timedelta(0))
    out = {}
    for name in store.table_names():
        table = store.open_latest(name)
        if table is None:
            continue
        if name == fulltext.PASSAGE_TEXT:
            fulltext.finish_rebuild(table)
        table.optimize(cleanup_older_than=age)
        out[name] = int(store.open_latest(name).version)
    return out
