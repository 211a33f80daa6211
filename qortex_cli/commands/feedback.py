"""Feedback commands: ``qortex feedback`` (judge a query's results) and ``qortex factors update``
(fold the judgements into learned teleportation factors).

Neither imports Dagster at import time; ``factors update`` imports it only when the pipeline's
``teleportation_factors`` asset is there to materialise.
"""

from __future__ import annotations

import argparse

from qortex_cli.output import json_text
from qortex_cli.parsing import add_home, home_of


def cmd_feedback(args: argparse.Namespace) -> int:
    from qortex_core.feedback.events import QueryLog, record_feedback
    from qortex_core.storage.store import LanceStore
    from qortex_core.storage.tenants import validate_tenant

    store = LanceStore.open(home_of(args))
    events = record_feedback(
        store,
        QueryLog(store, tenant=validate_tenant(args.tenant)),
        args.query_id,
        accepted=args.accept,
        rejected=args.reject,
        partial=args.partial,
    )
    judged = len(set(args.accept) | set(args.reject) | set(args.partial))
    summary = {
        "query_id": args.query_id,
        "recorded": len(events),
        "already_recorded": judged - len(events),  # the same judgement again counts once
        "concepts": sorted({c for e in events for c in e.concept_ids}),
    }
    again = f" ({summary['already_recorded']} already recorded)" if judged > len(events) else ""
    print(
        json_text(summary)
        if args.json
        else f"recorded {len(events)} judgement(s){again} on {len(summary['concepts'])} "
        "concept(s); run `qortex factors update` to apply"
    )
    return 0


def _fold_with_dagster(home, force: bool) -> dict | None:
    """Materialise the ``teleportation_factors`` asset in-process, or None when the asset is not
    there."""
    try:
        from qortex_cli.runs.local import materialize_factors
    except ImportError:
        return None
    return materialize_factors(home, force=force)


def cmd_factors_update(args: argparse.Namespace) -> int:
    from qortex_core.feedback.factors import concept_names, update_factors
    from qortex_core.storage.store import LanceStore

    home = home_of(args)
    summary = None if args.via == "library" else _fold_with_dagster(home, args.force)
    if summary is None:
        if args.via == "dagster":
            from qortex_core.errors import ConfigError

            raise ConfigError(
                "the Dagster asset teleportation_factors is not available (assets/factors.py)"
            )
        store = LanceStore.open(home)
        report = update_factors(store, force=args.force)
        names = concept_names(store, [c for c, _ in report.boosted + report.suppressed])
        summary = {
            "via": "library",
            "folded": report.folded,
            "concepts": report.concepts,
            "watermark": report.watermark,
            "skipped": report.skipped,
            "boosted": [[names[c], round(f, 4)] for c, f in report.boosted],
            "suppressed": [[names[c], round(f, 4)] for c, f in report.suppressed],
        }
    if args.json:
        print(json_text(summary))
    elif summary.get("skipped"):
        print(
            f"factors already current (events version {summary['watermark']}, "
            f"{summary['concepts']} concepts)"
        )
    else:
        print(
            f"folded {summary['folded']} events into {summary['concepts']} concept factors via "
            f"{summary['via']}"
        )
        for label in ("boosted", "suppressed"):
            if summary[label]:
                print(f"  {label}: " + ", ".join(f"{n} x{f:.3f}" for n, f in summary[label]))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    fb = sub.add_parser(
        "feedback", help="judge results of a query (ids from `qortex query --json`)"
    )
    fb.add_argument("--query-id", required=True)
    fb.add_argument("--accept", action="append", default=[], metavar="ID")
    fb.add_argument("--reject", action="append", default=[], metavar="ID")
    fb.add_argument("--partial", action="append", default=[], metavar="ID")
    fb.add_argument("--json", action="store_true")
    add_home(fb)
    fb.set_defaults(func=cmd_feedback)

    fa = sub.add_parser("factors", help="learned teleportation factors")
    fsub = fa.add_subparsers(dest="factors_command", required=True)
    up = fsub.add_parser(
        "update", help="fold new feedback events into the factors (no daemon needed)"
    )
    up.add_argument(
        "--via",
        choices=["auto", "dagster", "library"],
        default="auto",
        help="materialise the Dagster asset in-process (auto when available) or call the library "
        "fold",
    )
    up.add_argument("--force", action="store_true", help="re-fold even when no new event arrived")
    up.add_argument("--json", action="store_true")
    add_home(up)
    up.set_defaults(func=cmd_factors_update)
