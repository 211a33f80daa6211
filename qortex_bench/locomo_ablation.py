"""LoCoMo ablations: evidence recall@k of retrieval and graph variants on conversations.

The LoCoMo half of docs/ablation.md (``qortex ablation --locomo FILE... --home DIR``). Each
graph variant rebuilds every conversation's snapshot with its :class:`GraphConfig` (the turns,
extractions and embeddings are reused: only the snapshot stage runs), then each retrieval
variant asks every question of its own conversation. The default graph is rebuilt last, so
the home ends as ``qortex eval --locomo`` leaves it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from qortex_bench.ablation import Variant
from qortex_bench.locomo import (
    LocomoSetup,
    ask_questions,
    index_conversation,
    load_conversations,
)
from qortex_bench.locomo_score import Tally, summary
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.sequence import SequenceConfig
from qortex_core.query.config import RetrievalConfig


@dataclass(frozen=True)
class GraphVariant:
    """Retrieval variants asked over snapshots built with one graph configuration."""

    name: str  # appended to each row's name ("" for the default graph)
    graph: GraphConfig
    rows: tuple[Variant, ...]
    observations: bool = True  # the files' observations as recorded facts (else offline only)


def locomo_variants(base: RetrievalConfig = RetrievalConfig()) -> list[GraphVariant]:
    """The LoCoMo rows: every mode, the ``textwalk`` parameters, the attribution check, the
    sequence edges and the recorded observations."""
    r = dataclasses.replace
    tw = base.textwalk

    def textwalk(**change) -> RetrievalConfig:
        return r(base, textwalk=r(tw, **change))

    modes = [Variant(f"{m} mode", base, mode=m) for m in ("dense", "lexical", "text")]
    modes += [Variant(f"{m} mode", base, mode=m) for m in ("hipporag", "hybrid")]
    walk = [
        Variant(
            f"textwalk mode ({tw.seeds} seeds, walk weight {tw.walk_weight})", base, "textwalk"
        ),
        Variant("textwalk, 10 seeds", textwalk(seeds=10), "textwalk"),
        Variant("textwalk, 50 seeds", textwalk(seeds=50), "textwalk"),
        Variant("textwalk, walk weight 0.25", textwalk(walk_weight=0.25), "textwalk"),
        Variant("textwalk, walk weight 1.0", textwalk(walk_weight=1.0), "textwalk"),
        Variant("textwalk, no fact seeds", textwalk(fact_weight=0.0), "textwalk"),
        Variant("textwalk, fact weight 0.5", textwalk(fact_weight=0.5), "textwalk"),
        Variant("textwalk, fact weight 2.0", textwalk(fact_weight=2.0), "textwalk"),
        Variant("auto mode (defaults)", base, "auto"),
        Variant("auto without the textwalk route", textwalk(route_share=2.0), "auto"),
    ]
    seq = GraphConfig().sequence

    def graph(**change) -> GraphConfig:
        return GraphConfig(sequence=r(seq, **change))

    only_walk = (Variant("textwalk mode", base, "textwalk"),)
    return [
        GraphVariant("", GraphConfig(), tuple(modes + walk + _attribution_rows(base))),
        GraphVariant(
            ", no sequence edges",
            GraphConfig(sequence=SequenceConfig(weight=0.0)),
            (Variant("textwalk mode", base, "textwalk"), Variant("hipporag mode", base)),
        ),
        GraphVariant(", sequence weight 1.0", graph(weight=1.0), only_walk),
        GraphVariant(", sequence window 1", graph(window=1), only_walk),
        GraphVariant(", sequence window 5", graph(window=5), only_walk),
        GraphVariant(
            ", offline extractor only (no observations)",
            GraphConfig(),
            (
                Variant("textwalk mode", base, "textwalk"),
                Variant("auto mode", base, "auto"),
                Variant("textwalk, no fact seeds", textwalk(fact_weight=0.0), "textwalk"),
            ),
            observations=False,
        ),  # fmt: skip
    ]


def _attribution_rows(base: RetrievalConfig) -> list[Variant]:
    """``auto`` without the attribution check and with a looser and a stricter margin."""

    def attribution(**change) -> RetrievalConfig:
        return dataclasses.replace(
            base, attribution=dataclasses.replace(base.attribution, **change)
        )

    return [
        Variant("auto, no attribution check", attribution(enabled=False), "auto"),
        Variant("auto, attribution margin 0.03", attribution(margin=0.03), "auto"),
        Variant("auto, attribution margin 0.08", attribution(margin=0.08), "auto"),
    ]


def run_locomo_ablation(
    files: Sequence[Path],
    home: Path,
    embedder,
    variants: Sequence[GraphVariant],
    ks: Sequence[int] = (1, 2, 5, 10),
) -> list[dict]:
    """Evidence recall@k (categories 1-4) and the share of adversarial (category 5) and of
    answerable questions answered ``no_answer``, per row."""
    from qortex_core.query.retriever import Retriever

    convs = load_conversations(files)
    vectors = [embedder.embed([q.text for q in c.questions + c.adversarial]) for c in convs]
    answerable = sum(len(c.questions) for c in convs)
    adversarial = sum(len(c.adversarial) for c in convs)
    rows = []
    for gv in [*variants, GraphVariant("", GraphConfig(), ())]:  # the default graph last
        for conv in convs:
            index_conversation(
                conv, home, embedder, graph_config=gv.graph, observations=gv.observations
            )
        for v in gv.rows:
            setup = LocomoSetup(tuple(files), home, (v.mode,), tuple(ks))
            tally = Tally([])
            for conv, vecs in zip(convs, vectors):
                retriever = Retriever.open(
                    home, embedder=embedder, config=v.config, tenant=conv.name
                )
                ask_questions(retriever, conv, vecs, v.mode, setup, tally)
            result = summary(tally, ks, answerable, adversarial)
            shares = result["abstention"]
            rows.append(
                {
                    "variant": v.name + gv.name,
                    **result["recall"],
                    "cat. 5 no_answer": shares["adversarial_no_answer"] or 0.0,
                    "cat. 1-4 no_answer": shares["answerable_no_answer"] or 0.0,
                }
            )
    return rows
