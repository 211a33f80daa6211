"""``qortex doctor``: check a data home and report problems plainly (exit 0 healthy, 1 problems
found)."""

from __future__ import annotations

import argparse

from qortex_cli.output import json_text


def cmd_doctor(args: argparse.Namespace) -> int:
    from qortex_core.ops.doctor import DoctorConfig, diagnose
    from qortex_core.storage.tenants import tenant_home

    home = tenant_home(args.home, args.tenant)
    report = diagnose(home, config=DoctorConfig(probe=not args.no_probe))
    if args.json:
        print(json_text(report.to_dict(), indent=2))
    else:
        print(f"data home {report.home}")
        for check in report.checks:
            print(f"  {'ok     ' if check.ok else 'PROBLEM'}  {check.name}: {check.detail}")
        problems = len(report.problems)
        print("healthy" if not problems else f"{problems} problem(s) found")
    return 0 if report.healthy else 1


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``qortex doctor``."""
    p = sub.add_parser(
        "doctor", help="check a data home: tables, snapshot checksums, pointer, orphaned files"
    )
    p.add_argument("--home", help="data home (default: $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--tenant", help="check this tenant's namespace (default: the home itself)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--no-probe", action="store_true", help="skip the probe query (no embedder is loaded)"
    )
    p.set_defaults(func=cmd_doctor)
