"""``qortex bench snapshot``: the snapshot stage alone on an existing home, a full build
against incremental ones on the latest snapshot, in one run."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_bench_snapshot(args: argparse.Namespace) -> int:
    from qortex_bench.snapshot_bench import SnapshotBenchConfig, run_snapshot_bench
    from qortex_cli.output import emit_report

    report = run_snapshot_bench(SnapshotBenchConfig(Path(args.home), args.repeat))
    emit_report(report, args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    """Add ``qortex bench snapshot``."""
    p = kinds.add_parser(
        "snapshot",
        help="the snapshot stage on a home: a full build against incremental builds on the "
        "latest snapshot (publishes them; QORTEX_SNAPSHOT_KEEP applies after the run)",
    )
    p.add_argument("--home", required=True, help="a home with a published snapshot")
    p.add_argument("--repeat", type=int, default=2, help="incremental builds timed")
    p.add_argument("--json", help="also write the report to this file")
    p.set_defaults(func=cmd_bench_snapshot)
