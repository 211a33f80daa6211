"""``qortex bench ...``: speed and quality measured against a baseline in one run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmarks: ppr, query, ingest, scale, incremental, snapshot, fragments, memory, "
        "soak, mcp, embed",
    )
    kinds = bench.add_subparsers(dest="bench", required=True)
    from qortex_cli.commands.bench import (
        embed,
        fragments,
        incremental,
        ingest,
        mcp,
        memory,
        ppr,
        scale,
        snapshot,
        soak,
    )

    for kind in (ppr, ingest, scale, incremental, snapshot, fragments, memory, soak, mcp, embed):
        kind.register(kinds)
