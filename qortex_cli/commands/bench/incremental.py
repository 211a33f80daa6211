"""``qortex bench incremental``: full build, +delta files, unchanged run and consolidation of
delta memories, as seconds and ratios to the full build, with the top 10 of every mode checked
against a full rebuild of the same final corpus."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def _consolidate(home: Path, env: dict[str, str]) -> object:
    """The ``ingest`` job with no source folder (what ``memories_arrived`` requests)."""
    from qortex_cli.runs.local import run_ingest

    return run_ingest(None, home, progress=False, env=env)


def cmd_bench_incremental(args: argparse.Namespace) -> int:
    from qortex_bench.incremental_bench import IncrementalConfig, run_incremental
    from qortex_cli.commands.bench.scale import parse_sizes
    from qortex_cli.output import emit_report
    from qortex_core.embed import HashEmbedderConfig
    from qortex_core.errors import ConfigError

    sizes = parse_sizes(args.passages)
    HashEmbedderConfig(dim=args.dim)  # a bad dimension fails before any work
    if args.delta < 1 or args.queries < 1 or args.keep_snapshots < 0:
        raise ConfigError("--delta and --queries must be at least 1, --keep-snapshots at least 0")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="qortex-inc-"))
    config = IncrementalConfig(
        sizes, args.delta, workdir, args.dim, args.queries, keep_snapshots=args.keep_snapshots
    )
    emit_report(run_incremental(config, _consolidate), args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    """Add ``qortex bench incremental``."""
    p = kinds.add_parser(
        "incremental",
        help="what a change costs: full, +delta files, unchanged, consolidate seconds and ratios "
        "to the full build; top-10 agreement with a full rebuild; peak RSS",
    )
    p.add_argument("--passages", default="10000,100000", help="comma-separated corpus sizes")
    p.add_argument("--delta", type=int, default=10, help="files added, and memories remembered")
    p.add_argument("--dim", type=int, default=64, help="hash embedder width (benchmark tool)")
    p.add_argument("--queries", type=int, default=50, help="queries compared per mode")
    p.add_argument("--workdir", help="folder for the homes and sources (default: a temp folder)")
    p.add_argument(
        "--keep-snapshots",
        type=int,
        default=0,
        help="delete all but this many newest snapshots between steps, untimed (disk at 1M); "
        "0 keeps every one",
    )
    p.add_argument("--json", help="also write the report to this file")
    p.set_defaults(func=cmd_bench_incremental)
