"""The ``qortex`` command line. Library commands never import Dagster."""

from __future__ import annotations

import argparse
import os
import sys

from qortex_cli.parsing import QortexParser

COMMAND_MODULES = (  # in the order of `qortex --help`
    "qortex_cli.commands.evaluate",
    "qortex_cli.commands.query",
    "qortex_cli.commands.ingest",
    "qortex_cli.commands.bench",
    "qortex_cli.commands.ablation",
    "qortex_cli.commands.feedback",
    "qortex_cli.commands.snapshots",
    "qortex_cli.commands.mcp",
    "qortex_cli.commands.memories",
    "qortex_cli.commands.doctor",
    "qortex_cli.commands.purge",
    "qortex_cli.commands.ui",
    "qortex_cli.commands.graph",
    "qortex_cli.commands.archive",
)


def build_parser() -> argparse.ArgumentParser:
    """The ``qortex`` parser with every command module's subcommands."""
    parser = QortexParser(prog="qortex", description="Long-term memory for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    import importlib

    for module in COMMAND_MODULES:  # each adds its subcommands; none imports dagster at import time
        importlib.import_module(module).register(sub)
    return parser


def _one_line(message: object) -> str:
    """An error message on one line (a user error prints exactly one line)."""
    return " ".join(str(message).split()) or "unknown error"


def main(argv: list[str] | None = None) -> int:
    from qortex_core.errors import QortexError, StorageError, storage_error
    from qortex_core.ingest.allocators import quiet_startup

    os.environ.setdefault(
        "HF_HUB_DISABLE_PROGRESS_BARS", "1"
    )  # stderr: our progress lines and one error line only
    try:
        with quiet_startup():  # the command modules' imports: long-lived objects only
            args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error (one line printed) or --help
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if getattr(args, "extractor", "x") is None:
        # recorded LLM output when there is some: --openie, or LoCoMo files' observations
        args.extractor = "recorded" if args.openie or getattr(args, "locomo", None) else "offline"
    try:
        from qortex_core.settings import get_settings

        get_settings()  # every QORTEX_* variable validated before any work
        return int(args.func(args) or 0)
    except QortexError as exc:
        print(f"qortex: error: {_one_line(exc)}", file=sys.stderr)
        return 1 if isinstance(exc, StorageError) else 2  # 1: the machine refused, 2: bad input
    except OSError as exc:  # the environment (disk full, permissions, a path that is a file)
        named = getattr(exc, "filename", None)
        refused = storage_error(str(named or "a file"), exc)
        where = f" ({named})" if named else ""
        text = str(refused) if refused else f"{exc.strerror or exc}{where}"
        print(f"qortex: error: {_one_line(text)}", file=sys.stderr)
        return 1 if refused else 2
    except KeyboardInterrupt:
        print("qortex: interrupted", file=sys.stderr)
        return 130


def run(argv: list[str] | None = None) -> int:
    """:func:`main` for a process that ends with it (the ``qortex`` script, ``python -m
    qortex_cli``): what the command left is frozen out of the cyclic collector before the
    interpreter shuts down, whose last collection would otherwise walk every object the run
    made only to free memory that the exit frees anyway (about 1 s after an ingest run on
    100k passages). ``atexit`` handlers and finalizers still run."""
    import gc

    code = main(argv)
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(run())
