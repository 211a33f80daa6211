"""The ``qortex`` command line. Library commands never import Dagster."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pipelines.bars import StageProgress as Progress
from pipelines.commands.query import RECOGNITION_HELP, recognizer_of
from pipelines.output import json_text
from pipelines.parsing import QortexParser, csv_of, mode_name, strict_int

COMMAND_MODULES = (
    "pipelines.commands.query",
    "pipelines.commands.ingest",
    "pipelines.commands.bench",
    "pipelines.commands.ablation",
    "pipelines.commands.memory",
    "pipelines.commands.agent",
    "pipelines.commands.doctor",
    "pipelines.commands.purge",
    "pipelines.commands.ui",
    "pipelines.commands.graph",
    "pipelines.commands.archive",
)


def cmd_eval(args: argparse.Namespace) -> int:
    from qortex_bench.evaluate import EvalSetup, run_evaluation
    from qortex_core.errors import ConfigError
    from qortex_core.query import modes

    if args.json and (Path(args.json).is_dir() or not Path(args.json).resolve().parent.is_dir()):
        raise ConfigError(
            f"cannot write the report to {args.json}: its folder does not exist or it is a "
            "directory"
        )
    if args.updates:
        from pipelines.commands.updates_eval import eval_updates

        return eval_updates(args, Progress(), emit_report)
    if args.locomo:
        return _eval_locomo(args)
    if not args.questions or not args.corpus:
        raise ConfigError("qortex eval needs --questions and --corpus, or --locomo FILE ...")
    home = Path(args.home) if args.home else Path(".qortex-eval") / Path(args.corpus).stem
    recognizer = recognizer_of(args)
    report = run_evaluation(
        EvalSetup(
            Path(args.questions),
            Path(args.corpus),
            home,
            Path(args.openie) if args.openie else None,
            args.extractor,
            args.modes or modes.eval_defaults(),
            args.k,
            args.single_hop,
        ),
        progress=Progress(),
        recognizer=recognizer,
        retrieval_config=_retrieval_config(args),
    )
    if args.offtopic:
        report["offtopic"] = _offtopic(args, home, report["results"])
    emit_report(report, args.json)
    return 0


def _retrieval_config(args: argparse.Namespace):
    """Retrieval defaults, with ``--min-relevance`` when given."""
    from qortex_core.query.config import RetrievalConfig
    from qortex_core.query.relevance import threshold

    if args.min_relevance is None:
        return RetrievalConfig()
    return RetrievalConfig(min_relevance=threshold(args.min_relevance, 0.0))


def _offtopic(args: argparse.Namespace, home: Path, results: dict) -> dict:
    """``--offtopic [FILE]``: share of unanswerable queries each mode answers with no_answer."""
    from qortex_bench.abstention import OFFTOPIC_QUERIES, abstention, load_queries
    from qortex_core.query.retriever import Retriever

    path = OFFTOPIC_QUERIES if args.offtopic == "bundled" else Path(args.offtopic)
    queries = load_queries(path)
    retriever = Retriever.open(home, config=_retrieval_config(args))
    return {"file": str(path), **abstention(retriever, queries, tuple(results))}


def _eval_locomo(args: argparse.Namespace) -> int:
    """``qortex eval --locomo FILE ...``: each conversation in its own tenant, every mode scored."""
    from qortex_bench.locomo import LocomoSetup, run_locomo
    from qortex_core.errors import ConfigError
    from qortex_core.query import modes

    if args.questions or args.corpus or args.openie or args.offtopic:
        raise ConfigError("--locomo takes no --questions, --corpus, --openie or --offtopic")
    setup = LocomoSetup(
        tuple(Path(f) for f in args.locomo),
        Path(args.home) if args.home else Path(".qortex-eval") / "locomo",
        args.modes or modes.names(),
        args.k,
        via=args.locomo_via,
        observations=args.extractor == "recorded",  # the default: the files' observations
    )
    report = run_locomo(setup, progress=Progress(), retrieval_config=_retrieval_config(args))
    emit_report(report, args.json)
    return 0


def emit_report(report: dict, path: str | None) -> None:
    """Print a JSON report and, when ``path`` is given, write the same text there."""
    text = json_text(report, indent=2)
    if path:
        Path(path).write_text(text + "\n")
    print(text)


def _add_eval(sub: Any, modes: Any) -> None:
    """``qortex eval``."""
    ev = sub.add_parser(
        "eval", help="recall@k of retrieval modes on a HippoRAG-format dataset or LoCoMo"
    )
    ev.add_argument("--questions")
    ev.add_argument("--corpus")
    ev.add_argument(
        "--locomo",
        nargs="+",
        metavar="FILE",
        help="LoCoMo conversation files: evidence recall per category and abstention",
    )
    ev.add_argument("--updates", metavar="FILE", help="updates file: current/as_of facts")
    ev.add_argument(
        "--locomo-via",
        choices=["memory", "documents"],
        default="memory",
        help="turns written as memories and consolidated (memory, the default: the agent's "
        "write path) or indexed as dated passages (documents)",
    )
    ev.add_argument("--openie")
    ev.add_argument(
        "--extractor",
        choices=["recorded", "offline"],
        default=None,
        help="recorded: replay recorded LLM extraction (--openie; with --locomo the files' "
        "per-speaker observations, the default), offline: the offline extractor alone",
    )
    ev.add_argument(
        "--modes",
        type=csv_of(mode_name, "list of modes"),
        default=None,
        help=f"comma-separated, of: {', '.join(modes.names())} (default: "
        f"{','.join(modes.eval_defaults())}; with --locomo: all)",
    )
    ev.add_argument("--k", type=csv_of(strict_int, "list of integers"), default=(1, 2, 5, 10))
    ev.add_argument(
        "--min-relevance",
        type=float,
        help="abstention threshold for every query (default: RetrievalConfig.min_relevance)",
    )
    ev.add_argument(
        "--offtopic",
        nargs="?",
        const="bundled",
        metavar="FILE",
        help="also ask queries nothing answers (default file: 50 gibberish/off-topic) and "
        "report the share answered with no_answer",
    )
    ev.add_argument("--home")
    ev.add_argument("--json")
    ev.add_argument("--recognition", action="store_true", help=RECOGNITION_HELP)
    ev.add_argument(
        "--single-hop",
        action="store_true",
        help="ask the MuSiQue question_decomposition steps (one hop each) instead of the questions",
    )
    ev.set_defaults(func=cmd_eval)


def build_parser() -> argparse.ArgumentParser:
    from qortex_core.query import modes  # the registered retrieval modes

    parser = QortexParser(prog="qortex", description="Long-term memory for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_eval(sub, modes)

    import importlib

    for module in COMMAND_MODULES:  # each adds its subcommands; none imports dagster at import time
        importlib.import_module(module).register(sub)
    return parser


def _one_line(message: object) -> str:
    """An error message on one line (a user error prints exactly one line)."""
    return " ".join(str(message).split()) or "unknown error"


def main(argv: list[str] | None = None) -> int:
    from qortex_core.errors import QortexError, StorageError, storage_error

    os.environ.setdefault(
        "HF_HUB_DISABLE_PROGRESS_BARS", "1"
    )  # stderr: our progress lines and one error line only
    try:
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


if __name__ == "__main__":
    sys.exit(main())
