"""``qortex eval --updates FILE [--home DIR] [--json OUT]``: the updates benchmark
(:mod:`qortex_bench.updates`): superseded facts, ``as_of`` questions, both tiers."""

from __future__ import annotations

import argparse
from pathlib import Path


def eval_updates(args: argparse.Namespace, progress, emit_report) -> int:
    """Run the updates benchmark and print (and with ``--json`` write) its report."""
    from qortex_bench.updates import run_updates
    from qortex_core.errors import ConfigError

    if args.questions or args.corpus or args.openie or args.offtopic or args.locomo:
        raise ConfigError(
            "--updates takes no --questions, --corpus, --openie, --offtopic or --locomo"
        )
    modes = tuple(args.modes) if args.modes else ("auto",)
    report = run_updates(
        Path(args.updates), Path(args.home) if args.home else None, modes, progress=progress
    )
    emit_report(report, args.json)
    return 0
