"""Memory commands: ``qortex feedback``, ``qortex factors update``, ``qortex snapshots [prune]``,
``qortex mcp``.

None of them imports Dagster at import time; ``factors update`` imports it only
when the pipeline's ``teleportation_factors`` asset is there to materialise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from pipelines.output import json_text


def _home(args: argparse.Namespace):
    from qortex_core.storage.tenants import tenant_home

    return tenant_home(args.home, args.tenant)


def _add_home(p: argparse.ArgumentParser, nested: bool = False) -> None:
    """``--home`` and ``--tenant``; ``nested`` keeps a parent command's values when the subcommand
    omits them."""
    default = argparse.SUPPRESS if nested else None
    p.add_argument("--home", default=default, help="data home (default: $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--tenant", default=default, help="tenant namespace (default: the home itself)")


def cmd_feedback(args: argparse.Namespace) -> int:
    from qortex_core.feedback.events import QueryLog, record_feedback
    from qortex_core.storage.store import LanceStore
    from qortex_core.storage.tenants import validate_tenant

    store = LanceStore.open(_home(args))
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
        from pipelines.run_local import materialize_factors
    except ImportError:
        return None
    return materialize_factors(home, force=force)


def cmd_factors_update(args: argparse.Namespace) -> int:
    from qortex_core.feedback.factors import concept_names, update_factors
    from qortex_core.storage.store import LanceStore

    home = _home(args)
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


def cmd_snapshots(args: argparse.Namespace) -> int:
    from qortex_core.storage.retention import list_snapshots

    infos = list_snapshots(_home(args))
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

    home = _home(args)
    keep = args.keep if args.keep is not None else default_keep()
    if args.no_optimize or "://" in str(home):
        report = prune_snapshots(home, keep, optimize=not args.no_optimize)
    else:  # a local home: the purge path, so deleted text leaves old versions and files too
        from pipelines.commands.purge import purge_home

        report, _why = purge_home(home, keep)
    if args.json:
        print(json_text(report.to_dict()))
    else:
        print(
            f"kept {len(report.kept)} snapshot(s), removed {len(report.removed)}; optimized "
            f"{len(report.optimized)} table(s)"
        )
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from qortex_core.mcp_server import MCPConfig, serve, serve_http
    from qortex_core.storage.tenants import validate_tenant

    validate_tenant(args.tenant)
    where = _http_address(args)  # usage errors before anything loads
    config = MCPConfig(home=args.home, tenant=args.tenant, consolidate=consolidate_in_subprocess)
    if where is None:
        print("qortex mcp: serving on stdio (the embedder loads meanwhile)", file=sys.stderr)
        serve(config)
        return 0
    from qortex_core.serving.auth import read_tokens

    tokens = read_tokens(args.tokens)
    tenants = len(set(tokens.values()))
    print(
        f"qortex mcp: serving http://{where[0]}:{where[1]}/mcp for {len(tokens)} token(s) of "
        f"{tenants} tenant(s)",
        file=sys.stderr,
    )
    serve_http(config, where[0], where[1], tokens)
    return 0


def _http_address(args: argparse.Namespace) -> tuple[str, int] | None:
    """``--http HOST:PORT`` as (host, port), None for stdio; ``--tokens`` goes with it."""
    from qortex_core.errors import ConfigError

    if args.http is None:
        if args.tokens:
            raise ConfigError("--tokens is for --http HOST:PORT (stdio serves --tenant)")
        return None
    if not args.tokens:
        raise ConfigError("--http needs --tokens FILE (lines 'TOKEN TENANT'): no open server")
    host, _, port = args.http.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http wants HOST:PORT, e.g. 127.0.0.1:8765, got {args.http!r}")
    return host.strip("[]"), int(port)


def consolidate_in_subprocess(home, tenant: str) -> dict:
    """Run ``qortex consolidate --json`` for ``tenant`` in a child process; its summary.

    A child process, because the Dagster run sets process-wide state (``DAGSTER_HOME``, its
    logging) that the server's other tenants must not see, and its output must stay off the
    stdio channel.

    Raises:
        QortexError: the command failed (its one-line error).
    """
    from qortex_core.errors import QortexError

    argv = [sys.executable, "-m", "pipelines.cli", "consolidate", "--json", "--quiet"]
    argv += ["--tenant", tenant] + (["--home", str(home)] if home else [])
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        error = next((x for x in reversed(lines) if x.startswith("qortex: error: ")), None)
        raise QortexError(
            error.removeprefix("qortex: error: ")
            if error
            else f"consolidate failed "
            f"(exit {done.returncode}): {lines[-1] if lines else 'no output'}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def register(sub: argparse._SubParsersAction) -> None:
    fb = sub.add_parser(
        "feedback", help="judge results of a query (ids from `qortex query --json`)"
    )
    fb.add_argument("--query-id", required=True)
    fb.add_argument("--accept", action="append", default=[], metavar="ID")
    fb.add_argument("--reject", action="append", default=[], metavar="ID")
    fb.add_argument("--partial", action="append", default=[], metavar="ID")
    fb.add_argument("--json", action="store_true")
    _add_home(fb)
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
    _add_home(up)
    up.set_defaults(func=cmd_factors_update)

    sn = sub.add_parser(
        "snapshots", help="list snapshot versions (`qortex query --version V` pins one)"
    )
    sn.add_argument("--json", action="store_true")
    _add_home(sn)
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
    _add_home(pr, nested=True)
    pr.set_defaults(func=cmd_snapshots_prune)

    _register_mcp(sub)


def _register_mcp(sub: argparse._SubParsersAction) -> None:
    mc = sub.add_parser(
        "mcp",
        help="serve the memory (query, remember, list, graph, consolidate...) as MCP over stdio "
        "or streamable HTTP",
    )
    _add_home(mc)
    mc.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (needs --tokens)",
    )
    mc.add_argument(
        "--tokens",
        metavar="FILE",
        help="bearer tokens for --http: lines 'TOKEN TENANT' (16+ character tokens); a request "
        "reads only its token's tenant",
    )
    mc.set_defaults(func=cmd_mcp)
