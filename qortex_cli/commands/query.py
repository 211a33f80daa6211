"""``qortex query``: the answer from the latest snapshot and the memories written since.

Usage errors (an unknown mode, a bad ``--filter``, a bad time) are found while parsing, before
any model loads. The printed answer shows each hit's whole passage; hits below the relevance
cut-off and rules that no shown hit supports are left out of it (``--json`` has everything).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

from qortex_cli.filter_args import USAGE, combined, filter_arg
from qortex_cli.output import json_text
from qortex_cli.parsing import mode_name

RECOGNITION_HELP = (
    "filter the linked facts with an LLM (QORTEX_RECOGNITION_* or QORTEX_LLM_* environment)"
)


def _only_memories(args: argparse.Namespace) -> bool:
    """True when the home holds written memories and no snapshot yet (none pinned): the fresh
    tier answers alone, as the library and MCP do."""
    from qortex_core.memory.records import MemoryTable
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.store import LanceStore, is_uri
    from qortex_core.storage.tenants import tenant_home

    home = tenant_home(args.home, args.tenant)
    if args.version is not None or snap.list_versions(home):
        return False
    if not is_uri(home) and not (Path(home) / "lancedb").is_dir():
        return False  # nothing here at all: the retriever says "no snapshot" (never create it)
    return MemoryTable(LanceStore.open_reader(home)).version() > 0


def _ask_memories(args: argparse.Namespace, filters: dict | None):
    """The fresh tier's answer before the first snapshot (see :func:`_only_memories`)."""
    from qortex_core.agent.api import Memory, MemoryOptions

    memory = Memory(args.home, args.tenant, options=MemoryOptions(channel="cli"))
    return memory.search(
        args.text, top_k=args.top_k, mode=args.mode, since=args.since, until=args.until,
        domain=args.domain or None, profile=args.profile, min_relevance=args.min_relevance,
        as_of=args.as_of, include_superseded=args.include_superseded, filters=filters,
    )  # fmt: skip


def _ask(args: argparse.Namespace):
    """The query's result: from the latest (or pinned) snapshot and the fresh tier, or from the
    fresh tier alone before the first snapshot."""
    from qortex_core.agent.current import current_query
    from qortex_core.memory.asked_time import moment_of
    from qortex_core.memory.records import parse_time
    from qortex_core.query.filters import parse_filters
    from qortex_core.query.retriever import Retriever

    as_of = parse_time(args.as_of, "--as-of") or moment_of(args.text)  # bad: one line, exit 2
    moment = (as_of, args.include_superseded)
    filters = combined(args.filter)
    parse_filters(filters)  # a bad combination: one line, before any model loads
    if _only_memories(args):
        return _ask_memories(args, filters)
    retriever = Retriever.open(
        args.home, version=args.version, tenant=args.tenant, recognizer=recognizer_of(args)
    )
    result = current_query(
        retriever, args.text, args.top_k, moment,
        lambda depth, as_of: retriever.query(
            args.text, top_k=depth, mode=args.mode, domains=args.domain or None,
            profile=args.profile, since=args.since, until=_earlier(args.until, as_of),
            min_relevance=args.min_relevance, filters=filters,
        ),
        args.profile,
    )  # fmt: skip
    retriever.memory.flush()  # `qortex feedback --query-id` may come from another process next
    if retriever.memory.log_problem:  # the answer still prints; feedback on it will not resolve
        print(f"qortex: note: {_one_line(retriever.memory.log_problem)}", file=sys.stderr)
    return result


def recognizer_of(args: argparse.Namespace):
    """The LLM recognition filter when ``--recognition`` is given, else None."""
    if not getattr(args, "recognition", False):
        return None
    from qortex_core.query.recognition import require_recognizer

    return require_recognizer()


def _one_line(message: object) -> str:
    return " ".join(str(message).split()) or "unknown error"


def _earlier(a: str | None, b: str | None) -> str | None:
    """The earlier of two optional ISO times."""
    return b if a is None else a if b is None else min(a, b)


def shown(result, cut: float) -> tuple[list, list, int]:
    """The hits worth printing under an answer: those at least ``cut`` relevant (the first
    always), the rules one of whose concepts a shown hit came through, and how many hits
    were left out."""
    hits = [h for n, h in enumerate(result.passages) if n == 0 or (h.relevance or 0.0) >= cut]
    support = {c for h in hits for c in (*h.concept_ids, *h.concepts)}
    rules = [r for r in result.rules if support & {*r.concept_ids, *r.concepts}]
    return hits, rules, len(result.passages) - len(hits)


def _cut(args: argparse.Namespace) -> float:
    """The relevance cut-off of the printed answer: ``--min-relevance`` or the default."""
    from qortex_core.query.config import RetrievalConfig
    from qortex_core.query.relevance import threshold

    return threshold(args.min_relevance, RetrievalConfig().min_relevance)


def cmd_query(args: argparse.Namespace) -> int:
    result = _ask(args)
    if args.json:
        print(json_text(result.to_dict(), indent=2))
        return 0
    if result.no_answer:  # one line: nothing relevant (the reason is in the note)
        print(f"{result.fallback}")
        return 0
    route = f": {result.route}" if result.route else ""
    where = result.snapshot or "fresh memories"
    print(f"query {result.query_id} on {where} ({result.mode}){route}")
    if result.fallback:
        print(f"note: {result.fallback}")
    cut = _cut(args)
    hits, rules, weak = shown(result, cut)
    for n, hit in enumerate(hits, 1):
        _print_hit(n, hit)
    for rule in rules:
        via = ", ".join(rule.concepts[:3])
        print(f" rule [{rule.score:.4f}] {rule.id} {rule.text}  via {via}")
    if weak:
        print(f"({weak} weaker hit(s) below relevance {cut:.2f} not shown; --json lists them)")
    return 0


def _print_hit(n: int, hit) -> None:
    """A hit's head line, then its whole passage, indented."""
    via = f"  via {', '.join(hit.seeds[:3])}" if hit.seeds else ""
    when = f" ({hit.time[:10]})" if hit.time else ""
    tier = " fresh" if hit.tier == "fresh" else ""  # written, not yet consolidated
    head = f"{n:2d}. [{hit.score:.4f}] rel {hit.relevance:.2f}{tier} {hit.id}{when}"
    if hit.superseded_by:  # shown with --include-superseded or --as-of
        head += f" (until {hit.valid_until}, superseded by {hit.superseded_by})"
    print(f"{head} {hit.title}{via}")
    for paragraph in hit.text.splitlines() or [""]:
        print(textwrap.fill(paragraph, 100, initial_indent="    ", subsequent_indent="    "))


def register(sub: Any) -> None:
    """``qortex query``."""
    from qortex_core.query import modes

    q = sub.add_parser(
        "query",
        help="answer a query from the latest snapshot and the memories written since (before "
        "any snapshot: from the memories alone)",
    )
    q.add_argument("text")
    q.add_argument("--top-k", type=int, default=5)
    q.add_argument(
        "--mode",
        type=mode_name,
        default=modes.DEFAULT,
        help=f"one of {', '.join(modes.names())} (default: {modes.DEFAULT})",
    )
    q.add_argument("--version", help="pin a snapshot version (see `qortex snapshots`)")
    q.add_argument("--tenant", help="tenant namespace (default: the home itself)")
    q.add_argument("--profile", help="scoring profile (default: relevance only)")
    q.add_argument("--domain", action="append")
    q.add_argument(
        "--filter",
        action="append",
        type=filter_arg,
        metavar="COND",
        help=f"only memories whose metadata passes (repeatable, all must hold): {USAGE}",
    )
    q.add_argument("--since", help="only passages whose event time is at or after this ISO time")
    q.add_argument("--until", help="only passages up to this ISO time (a date: its whole day)")
    q.add_argument("--as-of", help="what was true at this ISO time (default: now)")
    q.add_argument("--include-superseded", action="store_true", help="superseded statements too")
    q.add_argument(
        "--min-relevance",
        type=float,
        help="answer 'no answer' when no passage is this relevant (0..1; 0: never; "
        "default: RetrievalConfig.min_relevance); weaker hits are not printed",
    )
    q.add_argument("--home")
    q.add_argument("--json", action="store_true")
    q.add_argument("--recognition", action="store_true", help=RECOGNITION_HELP)
    q.set_defaults(func=cmd_query)
