"""Agent-memory commands: ``qortex remember``, ``update``, ``forget``, ``history``, ``memories``,
``consolidate``.

Only ``consolidate`` imports Dagster (when it runs); the others use :mod:`qortex_core.agent.api`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from qortex_cli.commands.ingest import plural
from qortex_cli.output import json_text
from qortex_cli.parsing import add_home_and_json


def _memory(args: argparse.Namespace):
    from qortex_core.agent.api import Memory, MemoryOptions

    home = Path(args.home) if args.home else None
    return Memory(home, args.tenant, options=MemoryOptions(channel="cli"))


def _print_record(record, as_json: bool) -> None:
    if as_json:
        print(json_text(record.to_dict()))
        return
    when = f" [{record.time}]" if record.time else ""
    state = " (forgotten)" if record.forgotten else ""
    if record.superseded_by:
        state += f" (superseded by {record.superseded_by} at {record.valid_until})"
    print(
        f"{record.id} r{record.revision} {record.domain} {record.tier}{when}{state}: {record.text}"
    )


def cmd_remember(args: argparse.Namespace) -> int:
    mem = _memory(args)
    meta = _json_arg(args.metadata) if args.metadata else None
    record = mem.remember(
        args.text, time=args.time, domain=args.domain, source=args.source, metadata=meta
    )
    _print_record(record, args.json)
    return 0


def _json_arg(text: str) -> dict:
    from qortex_core.errors import RecordError

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"--metadata is not valid JSON: {exc.msg}") from None
    except RecursionError:  # the parser's own limit, far past the 32 levels metadata may have
        raise RecordError("--metadata is nested deeper than 32 levels") from None
    if not isinstance(value, dict):
        raise RecordError("--metadata must be a JSON object")
    return value


def cmd_update(args: argparse.Namespace) -> int:
    record = _memory(args).update(
        args.id, args.text, time=args.time, expected_revision=args.expected_revision
    )
    _print_record(record, args.json)
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    record = _memory(args).forget(args.id, expected_revision=args.expected_revision)
    _print_record(record, args.json) if args.json else print(f"forgot {record.id}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    mem = _memory(args)
    revisions = mem.history(args.id)
    if args.json:
        print(json_text([r.to_dict() for r in revisions]))
        return 0
    for r in revisions:
        extra = f" -> {r.target}" if r.target and r.op in ("merge", "merged") else ""
        print(f"r{r.revision} {r.created_at} {r.op}{extra} by {r.writer}: {r.text[:100]}")
    for line in _links(mem, args.id):
        print(line)
    return 0


def _links(mem, record_id: str) -> list[str]:
    """The supersession links of a written record, one line each."""
    if not record_id.startswith("m_"):
        return []
    record = mem.get(record_id)
    timeline = mem.supersession.timeline(mem.state)
    lines = [
        f"supersedes {p} (true until {record.valid_from})" for p in timeline.predecessors(record_id)
    ]
    if record.superseded_by:
        lines.append(f"superseded by {record.superseded_by} at {record.valid_until}")
    return lines


def cmd_memories(args: argparse.Namespace) -> int:
    records = _memory(args).list(
        domain=args.domain, since=args.since, until=args.until, limit=args.limit,
        include_superseded=args.include_superseded,
    )  # fmt: skip
    if args.json:
        print(json_text([r.to_dict() for r in records]))
        return 0
    if not records:
        print("no memories" + (" matching these options" if _narrowed(args) else ""))
    for record in records:
        _print_record(record, False)
    return 0


def _narrowed(args: argparse.Namespace) -> bool:
    """True when ``qortex memories`` was given an option that narrows the listing."""
    return bool(args.domain or args.since or args.until)


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Run the ingest job with no source folder: written memories into the graph."""
    from qortex_core.errors import DatasetError
    from qortex_core.storage.tenants import tenant_home

    home = tenant_home(args.home, args.tenant)
    from qortex_core.memory.records import MemoryTable
    from qortex_core.storage.store import LanceStore

    store = LanceStore.open(home)
    if MemoryTable(store).version() == 0 and store.count("documents") == 0:
        raise DatasetError(f"nothing to consolidate under {home}: no memory written, no document")
    from qortex_cli.runs.local import run_ingest  # imports dagster

    outcome = run_ingest(None, home, progress=not args.quiet)
    s = outcome.summary
    if args.json:
        print(json_text(outcome.report()))
        return 0
    print(
        f"consolidated {plural(s['memories'], 'memory')} ({s['merged_memories']} merged) beside "
        f"{plural(s['documents'] - s['memories'], 'document')} -> "
        f"{plural(s['passages'], 'passage')} -> snapshot {s['snapshot']}"
    )
    return 0


def _expected_revision(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--expected-revision",
        type=int,
        metavar="N",
        help="write only if N is still the memory's newest revision (else exit 2, nothing written)",
    )


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("remember", help="store a memory (searchable at once)")
    r.add_argument("text")
    r.add_argument("--time", help="event time, ISO 8601 (e.g. 2026-03-01T09:30:00Z)")
    r.add_argument("--domain", help="domain (default: default)")
    r.add_argument("--source", help="where the memory came from")
    r.add_argument("--metadata", help="a JSON object stored with the memory")
    add_home_and_json(r)
    r.set_defaults(func=cmd_remember)

    u = sub.add_parser("update", help="write a new revision of a memory")
    u.add_argument(
        "id", help="a memory id (m_...); a file's passage (p_...) changes only with its file"
    )
    u.add_argument("text")
    u.add_argument("--time", help="new event time, ISO 8601 (default: keep)")
    _expected_revision(u)
    add_home_and_json(u)
    u.set_defaults(func=cmd_update)

    f = sub.add_parser("forget", help="take a memory or a file's passage out of search")
    f.add_argument("id", help="a memory id (m_...) or a passage id (p_...)")
    _expected_revision(f)
    add_home_and_json(f)
    f.set_defaults(func=cmd_forget)

    h = sub.add_parser("history", help="every revision of a memory")
    h.add_argument("id", help="a memory id (m_...) or a passage id (p_...)")
    add_home_and_json(h)
    h.set_defaults(func=cmd_history)

    m = sub.add_parser("memories", help="list live written memories, newest first")
    m.add_argument("--domain")
    m.add_argument("--since", help="event time from (ISO 8601)")
    m.add_argument("--until", help="event time up to (ISO 8601)")
    m.add_argument("--limit", type=int, default=100)
    m.add_argument(
        "--include-superseded",
        action="store_true",
        help="also statements a later one superseded (with the link)",
    )
    add_home_and_json(m)
    m.set_defaults(func=cmd_memories)

    c = sub.add_parser("consolidate", help="move written memories into the graph (Dagster job)")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_home_and_json(c)
    c.set_defaults(func=cmd_consolidate)
