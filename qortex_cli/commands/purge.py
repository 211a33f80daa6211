"""``qortex purge``: deleted documents (and forgotten memories) gone from every file of a home.

The library part (:func:`qortex_core.ops.purge.purge`) prunes snapshots, drops orphans,
rewrites the LanceDB tables and cleans their old versions. This command then cleans the
Dagster instance under the home: runs that ended before the oldest retained snapshot are
deleted (their previews quote chunk text) and every SQLite file is vacuumed, so freed pages
keep no old bytes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sqlite3
from pathlib import Path

from qortex_cli.output import json_text


def clean_dagster(dagster_home: Path, before_iso: str) -> int:
    """Delete runs that ended before ``before_iso``, then vacuum the instance's SQLite files.

    Returns:
        the number of runs deleted.
    """
    if not (dagster_home / "dagster.yaml").is_file():
        return 0
    from dagster import DagsterInstance

    cutoff = dt.datetime.fromisoformat(before_iso).timestamp() if before_iso else float("inf")
    instance = DagsterInstance.from_config(str(dagster_home))
    removed: list[str] = []
    for record in instance.get_run_records():
        ended = record.end_time
        if ended is not None and ended < cutoff:
            instance.delete_run(record.dagster_run.run_id)
            shutil.rmtree(dagster_home / "storage" / record.dagster_run.run_id, ignore_errors=True)
            removed.append(record.dagster_run.run_id)
    instance.dispose()
    for db in dagster_home.rglob("*.db"):
        _drop_check_executions(db, removed)
        with sqlite3.connect(db) as conn:
            conn.execute("VACUUM")
    return len(removed)


def _drop_check_executions(db: Path, run_ids: list[str]) -> None:
    """Delete the asset check results of deleted runs (``delete_run`` leaves them; their
    metadata can quote passage text, e.g. the probe's top hit)."""
    with sqlite3.connect(db) as conn:
        table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'asset_check_executions'"
        ).fetchone()
        if table and run_ids:
            conn.executemany(
                "DELETE FROM asset_check_executions WHERE run_id = ?", [(r,) for r in run_ids]
            )
    conn.close()


def purge_home(home, keep: int, dagster_home: Path | None = None):
    """Purge ``home`` (see :mod:`qortex_core.ops.purge`) and its Dagster run history.

    When forgotten memories or passages are still in the derived tables (no consolidation since
    they were forgotten), the ingest job runs first; if it fails, nothing is purged.

    Returns:
        (the purge report, why it consolidated first: "" when it did not)
    """
    from qortex_core.ops.purge import purge, stale_derivations
    from qortex_core.settings import get_settings
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.writer_lock import writer_lock

    with writer_lock(home, "qortex purge"):
        why = stale_derivations(home)
        if why:
            from qortex_cli.runs.local import run_ingest  # imports dagster

            run_ingest(None, home, dagster_home=dagster_home, progress=False)
        report = purge(home, keep)
        created = [
            json.loads((snap.snapshots_dir(home) / n / "manifest.json").read_text())["created"]
            for n in report.kept
        ]
        folder = dagster_home or Path(get_settings().dagster_home or Path(home) / "dagster")
        clean_dagster(folder, min((c for c in created if c), default=""))
    return report, why


def cmd_purge(args: argparse.Namespace) -> int:
    from qortex_core.storage.store import default_home, home_of, is_uri
    from qortex_core.storage.tenants import tenant_home

    home = tenant_home(home_of(args.home) if args.home else default_home(), args.tenant)
    if is_uri(home):
        from qortex_core.errors import ConfigError

        raise ConfigError(f"purge needs a local data home (got {home}); use snapshots prune")
    report, why = purge_home(home, args.keep)
    if args.json:
        print(json_text(dict(report.to_dict(), consolidated_first=why)))
        return 0
    if why:
        print(f"consolidated first: {why}")
    orphans = sum(report.orphans_removed.values())
    print(
        f"kept {len(report.kept)} snapshot(s), removed {len(report.removed)}; "
        f"dropped {orphans} orphan row(s); rewrote {len(report.optimized)} table(s) "
        "and cleaned their old versions"
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "purge",
        help="remove deleted documents' text from every file of the home (old snapshots, "
        "LanceDB versions, Dagster run history)",
    )
    p.add_argument("--keep", type=int, default=1, help="snapshots to keep (default 1)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--home", help="data home (default: $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--tenant", help="tenant namespace (default: the home itself)")
    p.set_defaults(func=cmd_purge)
