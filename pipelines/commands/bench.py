"""``qortex bench ...``: speed and quality measured against a baseline in one run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser(
        "bench", help="benchmarks: ppr, query, ingest, scale, memory, soak, mcp, embed"
    )
    kinds = bench.add_subparsers(dest="bench", required=True)
    from pipelines.commands import (
        bench_embed,
        bench_ingest,
        bench_mcp,
        bench_memory,
        bench_ppr,
        bench_scale,
        bench_soak,
    )

    bench_ppr.register(kinds)
    bench_ingest.register(kinds)
    bench_scale.register(kinds)
    bench_memory.register(kinds)
    bench_soak.register(kinds)
    bench_mcp.register(kinds)
    bench_embed.register(kinds)
