"""``qortex ablation``: the ablation table of docs/ablation.md, from a home built by ``qortex
eval``."""

from __future__ import annotations

import argparse
from pathlib import Path

from qortex_cli.output import json_text
from qortex_cli.parsing import csv_of, strict_int


def _rows(args: argparse.Namespace) -> list[dict]:
    from qortex_bench.ablation import default_variants, run_ablation
    from qortex_bench.datasets import load_questions
    from qortex_core.embed import make_embedder
    from qortex_core.errors import DatasetError

    if bool(args.questions) == bool(args.locomo):
        raise DatasetError("give either --questions FILE or --locomo FILE [FILE ...]")
    if args.locomo:
        from qortex_bench.locomo_ablation import locomo_variants, run_locomo_ablation

        files = [Path(f) for f in args.locomo]
        return run_locomo_ablation(
            files, Path(args.home), make_embedder(), locomo_variants(), args.k
        )
    questions = load_questions(args.questions, args.single_hop)
    return run_ablation(args.home, questions, make_embedder(), default_variants(), args.k)


def cmd_ablation(args: argparse.Namespace) -> int:
    from qortex_bench.ablation import markdown_table

    rows = _rows(args)
    table = markdown_table(rows)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(json_text(rows, indent=2) + "\n")
    print(table, end="")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ablation", help="recall@k of retrieval variants (components off, parameter sweeps)"
    )
    p.add_argument("--questions", help="a HippoRAG-format question file (or --locomo)")
    p.add_argument(
        "--locomo",
        nargs="+",
        metavar="FILE",
        help="LoCoMo conversation files: the conversational rows (graph variants rebuild the "
        "snapshots of the home's tenants)",
    )
    p.add_argument(
        "--home", required=True, help="a data home built by `qortex eval` on the same corpus"
    )
    p.add_argument("--k", type=csv_of(strict_int, "list of integers"), default=(1, 2, 5, 10))
    p.add_argument(
        "--single-hop",
        action="store_true",
        help="ask the MuSiQue decomposition steps, one hop each",
    )
    p.add_argument("--markdown")
    p.add_argument("--json")
    p.set_defaults(func=cmd_ablation)
