"""``qortex bench fragments``: a LanceDB table's reads with one fragment, after many small
incremental writes, and after their compaction, in one run."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_bench_fragments(args: argparse.Namespace) -> int:
    from qortex_bench.fragments_bench import FragmentsBenchConfig, run_fragments_bench
    from qortex_cli.output import emit_report

    workdir = Path(args.workdir) if args.workdir else None
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
    config = FragmentsBenchConfig(args.rows, args.runs, args.per_run, workdir=workdir)
    emit_report(run_fragments_bench(config), args.json)
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def register(kinds: argparse._SubParsersAction) -> None:
    """Add ``qortex bench fragments``."""
    p = kinds.add_parser(
        "fragments",
        help="a table's scan and keyed reads after many small runs' writes, and after "
        "merging their fragments (storage/compaction.py)",
    )
    p.add_argument("--rows", type=_positive, default=500_000, help="rows written whole first")
    p.add_argument("--runs", type=_positive, default=300, help="small writes after them")
    p.add_argument("--per-run", type=_positive, default=10, help="rows each run appends")
    p.add_argument("--workdir", help="where the table is made (a temporary folder inside)")
    p.add_argument("--json", help="also write the report to this file")
    p.set_defaults(func=cmd_bench_fragments)
