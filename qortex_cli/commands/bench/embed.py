"""``qortex bench embed``: qortex's embedder against plain sentence-transformers encode."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from qortex_cli.output import json_text

DEFAULT_CORPUS = "../shared/benchmarks/2wiki_corpus/2wikimultihopqa_corpus.json"


def register(kinds: argparse._SubParsersAction) -> None:
    """Add the ``embed`` benchmark."""
    embed = kinds.add_parser(
        "embed", help="qortex's embedder vs plain SentenceTransformer.encode on one device"
    )
    embed.add_argument("--corpus", default=DEFAULT_CORPUS, help="a corpus JSON of passages")
    embed.add_argument("--passages", type=int, default=2000, help="passages embedded per pass")
    embed.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), help="default: QORTEX_EMBED_DEVICE (auto)"
    )
    embed.add_argument("--rounds", type=int, default=3)
    embed.add_argument("--json", help="write the report here")
    embed.set_defaults(func=cmd_bench_embed)


def cmd_bench_embed(args: argparse.Namespace) -> int:
    from qortex_bench.datasets import load_corpus
    from qortex_bench.embed_speed import measure
    from qortex_core.errors import ConfigError

    if args.passages < 8 or args.rounds < 1:
        raise ConfigError("--passages must be at least 8 and --rounds at least 1")
    texts = [p.text for p in load_corpus(args.corpus)[: args.passages]]
    from qortex_core.settings import get_settings

    result = measure(texts, args.device or get_settings().embed_device, args.rounds)
    print(
        f"device {result.device}: {result.texts} passages; qortex {result.qortex_per_s:,.0f}/s, "
        f"plain encode {result.plain_per_s:,.0f}/s; qortex/plain seconds {result.ratio:.2f}; "
        f"min cosine {result.min_cosine:.4f}"
    )
    if args.json:
        Path(args.json).write_text(json_text(dataclasses.asdict(result)))
    return 0
