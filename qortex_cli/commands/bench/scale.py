"""``qortex bench scale``: the scale ladder (stage seconds, RSS, snapshot size, query latency)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def _sizes(text: str) -> tuple[int, ...]:
    from qortex_core.errors import ConfigError

    try:
        sizes = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--passages takes comma-separated integers, got {text!r}") from None
    if not sizes or min(sizes) < 1 or list(sizes) != sorted(set(sizes)):
        raise ConfigError(f"--passages needs ascending positive sizes, got {text!r}")
    return sizes


def _report(path: str) -> dict:
    """An earlier ladder's --json report."""
    from qortex_core.errors import ConfigError
    from qortex_core.storage.source_files import load_json

    try:
        report = load_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"--requery {path}: {exc}") from None
    if not isinstance(report, dict) or not {"sizes", "workdir", "embedder"} <= report.keys():
        raise ConfigError(f"--requery {path}: not a `qortex bench scale --json` report")
    return report


def cmd_bench_scale(args: argparse.Namespace) -> int:
    from qortex_bench.scale_bench import ScaleConfig, drop_page_cache, requery, run_ladder
    from qortex_bench.scale_report import markdown
    from qortex_cli.output import emit_report
    from qortex_core.embed import HashEmbedderConfig

    if args.requery:
        report = requery(_report(args.requery), args.queries)
        if args.markdown:
            Path(args.markdown).write_text(markdown(report) + "\n")
        emit_report(report, args.json)
        return 0
    sizes = _sizes(args.passages)
    HashEmbedderConfig(dim=args.dim)  # a bad dimension fails before any work
    if args.cold:
        drop_page_cache()  # not root: fails here, before any work
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="qortex-scale-"))
    report = run_ladder(
        ScaleConfig(
            sizes=sizes, workdir=workdir, dim=args.dim, queries=args.queries or 50, cold=args.cold
        )
    )
    if args.markdown:
        Path(args.markdown).write_text(markdown(report) + "\n")
    emit_report(report, args.json)
    return 0


def register(kinds: argparse._SubParsersAction) -> None:
    """Add ``qortex bench scale``."""
    p = kinds.add_parser(
        "scale",
        help="scale ladder on synthetic corpora: per-stage seconds and peak RSS, snapshot size, "
        "retriever RSS, query p50/p95, growth exponents",
    )
    p.add_argument("--passages", default="10000,100000", help="comma-separated corpus sizes")
    p.add_argument("--dim", type=int, default=64, help="hash embedder width (benchmark tool)")
    p.add_argument(
        "--queries", type=int, default=None, help="timed queries per mode and size (default 50)"
    )
    p.add_argument("--workdir", help="folder for one data home per size (default: a temp folder)")
    p.add_argument(
        "--cold",
        action="store_true",
        help="sync and drop the page cache before each ingestion stage (root only; "
        "writes /proc/sys/vm/drop_caches)",
    )
    p.add_argument("--markdown", help="also write the table here")
    p.add_argument("--json", help="also write the report here")
    p.add_argument(
        "--requery",
        metavar="REPORT",
        help="no ingestion: time the retriever again on the data homes of this earlier --json "
        "report (the stage figures stay the report's)",
    )
    p.set_defaults(func=cmd_bench_scale)
