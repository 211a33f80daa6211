"""``qortex snapshots``: list the published graph snapshots; ``qortex snapshots prune``."""

from __future__ import annotations

import argparse

from qortex_cli.output import json_text
from qortex_cli.parsing import add_home, home_of


def cmd_snapshots(args: argparse.Namespace) -> int:
    from qortex_core.storage.retention import list_snapshots

    infos = list_snapshots(home_of(args))
    if args.json:
        print(json_text([i.to_dict() for i in infos], indent=2))
        return 0
    if not infos:
        print("no snapshots published (run `qortex ingest`)")
    for i in infos:
        counts = ", ".join(
            f"{k} {v}"
            for k, v in i.counts.items()
            if k in ("passages", "phrases", "facts", "rules")
        )
        print(f"{'*' if i.latest else ' '} {i.version:4d}  {i.name}  {i.created[:19]}  {counts}")
    return 0


def cmd_snapshots_prune(args: argparse.Namespace) -> int:
    from qortex_core.storage.retention import default_keep, prune_snapshots
    from qortex_core.storage.store import is_uri

    home = home_of(args)
    keep = args.keep if args.keep is not None else default_keep()
    if args.no_optimize or is_uri(home):
        report = prune_snapshots(home, keep, optimize=not args.no_optimize)
    else:  # a local home: the purge path, so deleted text leaves old versions and files too
        from qortex_cli.commands.purge import purge_home

        report, _why = purge_home(home, keep)
    if args.json:
        print(json_text(report.to_dict()))
    else:
        print(
            f"kept {len(report.kept)} snapshot(s), removed {len(report.removed)}; optimized "
            f"{len(report.optimized)} table(s)"
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    sn = sub.add_parser(
        "snapshots", help="list snapshot versions (`qortex query --version V` pins one)"
    )
    sn.add_argument("--json", action="store_true")
    add_home(sn)
    sn.set_defaults(func=cmd_snapshots)
    ssub = sn.add_subparsers(dest="snapshots_command")
    pr = ssub.add_parser(
        "prune", help="delete old snapshots (never LATEST) and optimize the LanceDB tables"
    )
    pr.add_argument(
        "--keep",
        type=int,
        default=None,
        help="snapshots to keep (default: $QORTEX_SNAPSHOT_KEEP or 5)",
    )
    pr.add_argument("--no-optimize", action="store_true")
    pr.add_argument("--json", action="store_true")
    add_home(pr, nested=True)
    pr.set_defaults(func=cmd_snapshots_prune)
