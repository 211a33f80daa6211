"""``qortex export`` and ``qortex import``: a home's records as one JSON Lines file, and back.

Thin over :mod:`qortex_core.ops.archive` and :mod:`qortex_core.ops.archive_import` (the format,
and why JSON Lines, are described there).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qortex_cli.output import json_text
from qortex_cli.parsing import add_home_and_json


def _home(args: argparse.Namespace):
    from qortex_core.storage.store import default_home, home_of
    from qortex_core.storage.tenants import tenant_home

    return tenant_home(home_of(args.home) if args.home else default_home(), args.tenant)


def _counts(rows: dict[str, int]) -> str:
    return ", ".join(f"{n} {name}" for name, n in rows.items())


def cmd_export(args: argparse.Namespace) -> int:
    from qortex_core.errors import HomeError
    from qortex_core.ops.archive import export_home
    from qortex_core.storage.store import is_uri

    home, out = _home(args), Path(args.out)
    if not is_uri(home) and not Path(home).is_dir():
        raise HomeError(f"data home not found: {home}")
    if out.is_dir():
        raise HomeError(f"{out} is a directory: name the export file (e.g. {out}/home.jsonl)")
    report = export_home(home, out)
    if args.json:
        print(json_text(report.to_dict()))
    else:
        print(f"exported {_counts(report.rows)} to {out} ({report.bytes} bytes)")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from qortex_core.ops.archive_import import import_home

    report = import_home(_home(args), Path(args.file))
    if args.json:
        print(json_text(report.to_dict()))
        return 0
    already = sum(report.present.values())
    print(
        f"imported {_counts(report.added)}"
        + (f"; {already} row(s) were already here" if already else "")
        + (
            f"; {report.conflicts} revision(s) differ here and were kept"
            if report.conflicts
            else ""
        )
        + f"; factors {report.factors}. Run `qortex consolidate` to build the graph."
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "export",
        help="write every memory revision, document, feedback event and factor to a JSONL file",
    )
    e.add_argument("out", metavar="OUT", help="the file to write (.jsonl, or .jsonl.gz)")
    add_home_and_json(e)
    e.set_defaults(func=cmd_export)
    i = sub.add_parser("import", help="merge an export file into a home (no duplicates)")
    i.add_argument("file", metavar="FILE", help="a file written by `qortex export`")
    add_home_and_json(i)
    i.set_defaults(func=cmd_import)
