"""The ``qortex`` command line. Library commands never import Dagster."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from pipelines.output import json_text
from pipelines.parsing import QortexParser, csv_of, strict_int

COMMAND_MODULES = (
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


RECOGNITION_HELP = (
    "filter the linked facts with an LLM (QORTEX_RECOGNITION_* or QORTEX_LLM_* environment)"
)


class Progress:
    """Progress on stderr: one line per stage, updated in place on a terminal."""

    def __init__(self) -> None:
        self.last: tuple[str, int] = ("", -1)

    def __call__(self, stage: str, done: int, total: int) -> None:
        pct = int(100 * done / total) if total else 100
        if (stage, pct // 10) == self.last and done != total:
            return
        self.last = (stage, pct // 10)
        end = "\n" if done >= total else ("\r" if sys.stderr.isatty() else "\n")
        print(f"  {stage}: {done}/{total}", end=end, file=sys.stderr, flush=True)


def _csv(kind):
    return lambda text: tuple(kind(x) for x in text.split(",") if x.strip())


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
    recognizer = _recognizer(args)
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


def _recognizer(args: argparse.Namespace):
    """The LLM recognition filter when ``--recognition`` is given (a ConfigError if none is
    configured), else None."""
    if not getattr(args, "recognition", False):
        return None
    from qortex_core.query.recognition import require_recognizer

    return require_recognizer()


def emit_report(report: dict, path: str | None) -> None:
    """Print a JSON report and, when ``path`` is given, write the same text there."""
    text = json_text(report, indent=2)
    if path:
        Path(path).write_text(text + "\n")
    print(text)


def _only_memories(args: argparse.Namespace) -> bool:
    """True when the home holds written memories and no snapshot yet (none pinned): the fresh
    tier answers alone, as the library and MCP do."""
    from qortex_core.memory.records import MemoryTable
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.store import LanceStore
    from qortex_core.storage.tenants import tenant_home

    home = tenant_home(args.home, args.tenant)
    if args.version is not None or snap.list_versions(home):
        return False
    if "://" not in str(home) and not (Path(home) / "lancedb").is_dir():
        return False  # nothing here at all: the retriever says "no snapshot" (never create it)
    return MemoryTable(LanceStore.open_reader(home)).version() > 0


def _ask_memories(args: argparse.Namespace):
    """The fresh tier's answer before the first snapshot (see :func:`_only_memories`)."""
    from qortex_core.memory.api import Memory, MemoryOptions

    memory = Memory(args.home, args.tenant, options=MemoryOptions(channel="cli"))
    return memory.search(
        args.text, top_k=args.top_k, mode=args.mode, since=args.since, until=args.until,
        domain=args.domain or None, profile=args.profile, min_relevance=args.min_relevance,
        as_of=args.as_of, include_superseded=args.include_superseded,
    )  # fmt: skip


def _ask(args: argparse.Namespace):
    """The query's result: from the latest (or pinned) snapshot and the fresh tier, or from the
    fresh tier alone before the first snapshot."""
    from qortex_core.memory.current import current_query
    from qortex_core.memory.records import parse_time
    from qortex_core.query.retriever import Retriever

    moment = (parse_time(args.as_of, "--as-of"), args.include_superseded)  # bad: one line, exit 2
    if _only_memories(args):
        return _ask_memories(args)
    retriever = Retriever.open(
        args.home, version=args.version, tenant=args.tenant, recognizer=_recognizer(args)
    )
    result = current_query(
        retriever, args.text, args.top_k, moment,
        lambda depth, as_of: retriever.query(
            args.text, top_k=depth, mode=args.mode, domains=args.domain or None,
            profile=args.profile, since=args.since, until=_earlier(args.until, as_of),
            min_relevance=args.min_relevance,
        ),
    )  # fmt: skip
    retriever.memory.flush()  # `qortex feedback --query-id` may come from another process next
    if retriever.memory.log_problem:  # the answer still prints; feedback on it will not resolve
        print(f"qortex: note: {_one_line(retriever.memory.log_problem)}", file=sys.stderr)
    return result


def cmd_query(args: argparse.Namespace) -> int:
    result = _ask(args)
    if args.json:
        print(json_text(result.to_dict(), indent=2))
        return 0
    if result.no_answer:  # one line: nothing relevant (the reason is in the note)
        print(f"{result.fallback}")
        return 0
    print(
        f"query {result.query_id} on {result.snapshot or 'fresh memories'} "
        f"({result.mode}){': ' + result.route if result.route else ''}"
    )
    if result.fallback:
        print(f"note: {result.fallback}")
    for n, hit in enumerate(result.passages, 1):
        via = f"  via {', '.join(hit.seeds[:3])}" if hit.seeds else ""
        when = f" ({hit.time[:10]})" if hit.time else ""
        tier = " fresh" if hit.tier == "fresh" else ""  # written, not yet consolidated
        head = f"{n:2d}. [{hit.score:.4f}] rel {hit.relevance:.2f}{tier} {hit.id}{when}"
        if hit.superseded_by:  # shown with --include-superseded or --as-of
            head += f" (until {hit.valid_until}, superseded by {hit.superseded_by})"
        print(f"{head} {hit.title}: {hit.text[:100]}{via}")
    for rule in result.rules:
        print(
            f" rule [{rule.score:.4f}] {rule.id} {rule.text[:100]}  via "
            f"{', '.join(rule.concepts[:3])}"
        )
    return 0


def _earlier(a: str | None, b: str | None) -> str | None:
    """The earlier of two optional ISO times."""
    return b if a is None else a if b is None else min(a, b)


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
        type=_csv(str),
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


def _add_query(sub: Any, modes: Any) -> None:
    """``qortex query``."""
    q = sub.add_parser(
        "query",
        help="answer a query from the latest snapshot and the memories written since (before "
        "any snapshot: from the memories alone)",
    )
    q.add_argument("text")
    q.add_argument("--top-k", type=int, default=5)
    q.add_argument(
        "--mode",
        default=modes.DEFAULT,
        help=f"one of {', '.join(modes.names())} (default: {modes.DEFAULT})",
    )
    q.add_argument("--version", help="pin a snapshot version (see `qortex snapshots`)")
    q.add_argument("--tenant", help="tenant namespace (default: the home itself)")
    q.add_argument("--profile", help="scoring profile (default: relevance only)")
    q.add_argument("--domain", action="append")
    q.add_argument("--since", help="only passages whose event time is at or after this ISO time")
    q.add_argument("--until", help="only passages up to this ISO time (a date: its whole day)")
    q.add_argument("--as-of", help="what was true at this ISO time (default: now)")
    q.add_argument("--include-superseded", action="store_true", help="superseded statements too")
    q.add_argument(
        "--min-relevance",
        type=float,
        help="answer 'no answer' when no passage is this relevant (0..1; 0: never; "
        "default: RetrievalConfig.min_relevance)",
    )
    q.add_argument("--home")
    q.add_argument("--json", action="store_true")
    q.add_argument("--recognition", action="store_true", help=RECOGNITION_HELP)
    q.set_defaults(func=cmd_query)


def build_parser() -> argparse.ArgumentParser:
    from qortex_core.query import modes  # the registered retrieval modes

    parser = QortexParser(prog="qortex", description="Long-term memory for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    _add_eval(sub, modes)
    _add_query(sub, modes)

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
    args = build_parser().parse_args(argv)
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
