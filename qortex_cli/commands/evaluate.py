"""``qortex eval``: recall@k of retrieval modes on a HippoRAG-format dataset (``--questions``,
``--corpus``), on LoCoMo conversations (``--locomo``), or the updates benchmark (``--updates``:
superseded facts, ``as_of`` questions, both tiers)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from qortex_cli.bars import StageProgress as Progress
from qortex_cli.commands.query import RECOGNITION_HELP, recognizer_of
from qortex_cli.output import emit_report
from qortex_cli.parsing import csv_of, mode_name, strict_int


def _eval_updates(args: argparse.Namespace) -> int:
    """``qortex eval --updates FILE``: the updates benchmark; its report printed (and written
    with ``--json``)."""
    from qortex_bench.updates import run_updates
    from qortex_core.errors import ConfigError

    if args.questions or args.corpus or args.openie or args.offtopic or args.locomo:
        raise ConfigError(
            "--updates takes no --questions, --corpus, --openie, --offtopic or --locomo"
        )
    modes = tuple(args.modes) if args.modes else ("auto",)
    report = run_updates(
        Path(args.updates), Path(args.home) if args.home else None, modes, progress=Progress()
    )
    emit_report(report, args.json)
    return 0


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
        return _eval_updates(args)
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


def register(sub: Any) -> None:
    """``qortex eval``."""
    from qortex_core.query import modes  # the registered retrieval modes

    what = "recall@k of retrieval modes on a HippoRAG-format dataset or LoCoMo"
    ev = sub.add_parser("eval", help=what)
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
