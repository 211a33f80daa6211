"""``qortex graph neighbors|path|entity|export|show``: explore the latest snapshot's graph.

Thin over :class:`~qortex_core.agent.api.Memory` (``neighbors``, ``path``, ``entity``) and
:mod:`qortex_core.ops.graph_export`; ``--json`` prints the results' ``to_dict()``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qortex_cli.output import json_text
from qortex_cli.parsing import add_home_and_json


def _memory(args: argparse.Namespace):
    import qortex_core
    from qortex_core.storage.store import default_home, home_of

    return qortex_core.open(home_of(args.home) if args.home else default_home(), args.tenant)


def _resolved_line(r) -> str:
    if r.how == "exact":
        return f"{r.name}"
    return f"{r.name} (nearest concept to {r.query!r}, cosine {r.score:.2f})"


def cmd_neighbors(args: argparse.Namespace) -> int:
    found = _memory(args).neighbors(args.name, depth=args.depth, limit=args.limit)
    if args.json:
        print(json_text(found.to_dict()))
        return 0
    print(f"{_resolved_line(found.resolved)}: {len(found.neighbors)} neighbour(s)")
    if not found.neighbors:
        print("  (no concept is linked to it)")
    for n in found.neighbors:
        via = f" via {n.via}" if n.depth > 1 else ""
        print(f"  {n.depth}  {n.name}  [{n.relation}]{via}  w={n.weight:.3g}")
    if found.truncated:
        print(f"  ... more within depth {args.depth}: raise --limit")
    return 0


def cmd_path(args: argparse.Namespace) -> int:
    found = _memory(args).path(args.source, args.target, max_len=args.max_len)
    if args.json:
        print(json_text(found.to_dict()))
        return 0
    ends = f"{_resolved_line(found.source)} -> {_resolved_line(found.target)}"
    if not found.found:
        print(f"{ends}: no path of at most {found.max_len} edges")
        return 0
    print(f"{ends}: {found.length} edge(s)")
    for step in found.steps:
        edge = f"  --{step.edge}--> " if step.edge else "  "
        label = f"passage {step.node_id} {step.name!r}" if step.kind == "passage" else step.name
        print(f"{edge}{label}")
    return 0


def cmd_entity(args: argparse.Namespace) -> int:
    info = _memory(args).entity(args.name, limit=args.limit)
    if args.json:
        print(json_text(info.to_dict()))
        return 0
    print(f"{_resolved_line(info.resolved)}: {len(info.facts)} fact(s), {info.degree} neighbour(s)")
    for fact in info.facts:
        print(f"  {fact.subject} | {fact.predicate} | {fact.object}")
        for p in fact.passages:
            when = f" ({p.time[:10]})" if p.time else ""
            print(f"      {p.id}{when} {p.title}: {p.text}")
    if info.mentioned_in:
        print(f"  mentioned in {len(info.mentioned_in)} passage(s): ")
        for p in info.mentioned_in:
            when = f" ({p.time[:10]})" if p.time else ""
            print(f"      {p.id}{when} {p.title}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from qortex_core.ops.graph_export import write_graph

    mem = _memory(args)
    explorer, hidden = mem.graph_explorer()
    out = Path(args.out) if args.out else None
    text = write_graph(explorer, args.format, out, hidden)
    if out is None:
        sys.stdout.write(text + "\n")
    else:
        print(f"wrote the graph of snapshot {explorer.view.name} to {out} ({args.format})")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from qortex_core.ops.graph_export import draw_neighborhood

    if args.limit < 2:
        from qortex_core.errors import ConfigError

        raise ConfigError(
            f"--limit must be at least 2 (the concept and a neighbour), got {args.limit}"
        )
    mem = _memory(args)
    found = mem.neighbors(args.name, depth=args.depth, limit=args.limit - 1)
    drawn = draw_neighborhood(mem.graph_explorer()[0], found, Path(args.out))
    print(f"drew {drawn} concept(s) around {_resolved_line(found.resolved)} to {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser("graph", help="explore the graph: neighbours, paths, entities, export")
    verbs = g.add_subparsers(dest="graph_command", required=True)
    n = verbs.add_parser("neighbors", help="concepts near a concept (exact name, else nearest)")
    n.add_argument("name")
    n.add_argument("--depth", type=int, default=1, help="hops (1..4, default 1)")
    n.add_argument("--limit", type=int, default=30, help="at most this many (default 30)")
    add_home_and_json(n)
    n.set_defaults(func=cmd_neighbors)
    p = verbs.add_parser("path", help="a shortest path between two concepts")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--max-len", type=int, default=4, help="edges at most (1..8, default 4)")
    add_home_and_json(p)
    p.set_defaults(func=cmd_path)
    e = verbs.add_parser("entity", help="the facts about a concept, with their passages")
    e.add_argument("name")
    e.add_argument("--limit", type=int, default=20, help="facts and passages (default 20)")
    add_home_and_json(e)
    e.set_defaults(func=cmd_entity)
    x = verbs.add_parser("export", help="the whole graph as GraphML or JSON")
    x.add_argument("--format", choices=["graphml", "json"], default="json")
    x.add_argument("--out", help="file to write (default: standard output)")
    add_home_and_json(x, as_json=False)
    x.set_defaults(func=cmd_export)
    s = verbs.add_parser("show", help="draw a concept's neighbourhood to a .png or .svg")
    s.add_argument("name")
    s.add_argument("--out", required=True, help="FILE.png or FILE.svg")
    s.add_argument("--depth", type=int, default=2, help="hops (1..4, default 2)")
    s.add_argument("--limit", type=int, default=30, help="concepts drawn (default 30)")
    add_home_and_json(s, as_json=False)
    s.set_defaults(func=cmd_show)
