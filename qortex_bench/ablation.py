"""Ablations: recall@k of retrieval variants over one snapshot, as a table."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from qortex_bench.datasets import Question, mean_recall
from qortex_core.embed import Embedder
from qortex_core.query.lexical import LexicalIndex
from qortex_core.query.ppr.solve import PPRConfig
from qortex_core.query.retriever import RetrievalConfig, Retriever
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore
from qortex_core.storage.symmetry import weighted_degree


@dataclass(frozen=True)
class Variant:
    """One row of the ablation table."""

    name: str
    config: RetrievalConfig
    mode: str = "hipporag"
    synonyms: bool = True
    synonym_min: float = (
        0.0  # synonym edges below this cosine are dropped (the index keeps >= its threshold)
    )

    @property
    def synonyms_below(self) -> float:
        """Cosine under which synonym edges are dropped (inf: all of them, 0: none)."""
        return self.synonym_min if self.synonyms else np.inf


def default_variants(base: RetrievalConfig = RetrievalConfig()) -> list[Variant]:
    """The rows the docs show: the defaults, each component removed, damping and passage-weight
    sweeps."""
    r = dataclasses.replace
    rows = [
        Variant("dense (same embedder)", base, mode="dense"),
        Variant("qortex defaults", base),
        Variant("no synonym edges", base, synonyms=False),
        Variant("no passage nodes in teleport", r(base, passage_node_weight=0.0)),
        Variant("no node specificity", r(base, specificity=False)),
        Variant("no passage context in fact linking", r(base, fact_context=0.0)),
        Variant("no verbatim concept seeds", r(base, lexical_weight=0.0)),
        Variant("no dense term in final score", r(base, dense_fusion=0.0)),
        Variant("no dense-first (walk ranks the top hit too)", r(base, dense_first=False)),
    ]
    rows += [Variant(f"damping {d}", r(base, ppr=r(base.ppr, damping=d))) for d in (0.3, 0.5, 0.85)]
    rows += [
        Variant(f"passage weight {w}", r(base, passage_node_weight=w)) for w in (0.01, 0.05, 0.2)
    ]
    rows += [
        Variant(f"passage seeds {k or 'every passage (HippoRAG 2)'}", r(base, passage_seeds=k))
        for k in (0, 300, 3000)
        if k != base.passage_seeds
    ]
    rows += [Variant(f"synonym threshold {t}", base, synonym_min=t) for t in (0.85, 0.9)]
    rows += lexical_variants(base)
    rows.append(
        Variant(
            "HippoRAG 2 settings (5 facts, no extras)",
            r(
                base,
                fact_top_k=5,
                fact_context=0.0,
                lexical_weight=0.0,
                dense_fusion=0.0,
                dense_first=False,
                ppr=PPRConfig(damping=0.5),
            ),
        )
    )
    return rows


def lexical_variants(base: RetrievalConfig = RetrievalConfig()) -> list[Variant]:
    """The lexical channel's rows: BM25 alone and fused with dense, and each of its uses."""
    r = dataclasses.replace
    ft = base.fulltext

    def fulltext(**change) -> RetrievalConfig:
        return r(base, fulltext=r(ft, **change))

    rows = [
        Variant("lexical mode (BM25, LanceDB full-text index)", base, mode="lexical"),
        Variant(f"text mode (dense + BM25, share {ft.text_weight})", base, mode="text"),
        Variant("textwalk mode (text passages seed the walk)", base, mode="textwalk"),
        Variant("auto mode (defaults)", base, mode="auto"),
        Variant("auto: weak links to hybrid, none to dense", fulltext(route_text=False), "auto"),
        Variant("dense-first instead of text-first", fulltext(text_first=False)),
        Variant(f"hybrid mode (BM25 share {ft.hybrid_weight})", base, mode="hybrid"),
    ]
    rows += [
        Variant(f"hybrid mode, BM25 share {w}", fulltext(hybrid_weight=w), mode="hybrid")
        for w in (0.0, 0.5)
        if w != ft.hybrid_weight
    ]
    rows += [
        Variant(f"BM25 passage seeds {w}", fulltext(seed_weight=w))
        for w in (0.0, 0.02, 0.1)
        if w != ft.seed_weight
    ]
    rows += [
        Variant(f"BM25 term in final score {w}", fulltext(final_weight=w))
        for w in (0.0, 0.1, 0.25)
        if w != ft.final_weight
    ]
    return rows


def without_synonyms(snapshot: snap.Snapshot, below: float = np.inf) -> snap.Snapshot:
    """The same snapshot with its synonym edges (those of cosine below ``below``) subtracted from
    the adjacency."""
    adj = snapshot.adjacency
    pairs = np.asarray(snapshot.arrays["synonym_pairs"]).reshape(-1, 2)
    weights = np.asarray(snapshot.arrays["synonym_weights"], dtype=np.float32)
    scale = (
        float(snapshot.manifest.get("params", {}).get("graph", {}).get("synonym_scale", 1.0)) or 1.0
    )
    keep = weights / scale < below  # stored weights are cosine x synonym_scale
    pairs, weights = pairs[keep], weights[keep]
    syn = sp.coo_matrix((weights, (pairs[:, 0], pairs[:, 1])), shape=adj.shape).tocsr()
    reduced = sp.csr_matrix(adj - syn - syn.T, dtype=np.float32)
    reduced.data[np.abs(reduced.data) < 1e-6] = 0
    reduced.eliminate_zeros()
    arrays = dict(snapshot.arrays)
    arrays.update(  # every adjacency array replaced, the degrees those of the reduced graph
        adj_indptr=reduced.indptr.astype(np.int64),
        adj_indices=reduced.indices.astype(np.int32),
        adj_data=reduced.data.astype(np.float32),
        adj_degree=weighted_degree(reduced),
    )
    return dataclasses.replace(snapshot, arrays=arrays)


def run_ablation(
    home: str | Path,
    questions: Sequence[Question],
    embedder: Embedder,
    variants: Sequence[Variant],
    ks: Sequence[int] = (2, 5, 10),
) -> list[dict]:
    """Recall@k of each variant on ``questions`` over the latest snapshot under ``home``."""
    base = snap.load(home)
    db = LanceStore.open(home).db  # the snapshot's pinned full-text index (lexical rows)
    graphs = {
        t: base if t == 0 else without_synonyms(base, t)
        for t in {v.synonyms_below for v in variants}
    }
    vectors = embedder.embed([q.text for q in questions])
    rows = []
    for v in variants:
        retriever = Retriever(graphs[v.synonyms_below], embedder, v.config)
        retriever.lexical = LexicalIndex.open(db, retriever.view, base.manifest)
        ranked = [
            [h.id for h in retriever.search(q.text, vec, max(ks), v.mode).passages]
            for q, vec in zip(questions, vectors)
        ]
        rows.append({"variant": v.name, **mean_recall(ranked, questions, ks)})
    return rows


def markdown_table(rows: Sequence[dict]) -> str:
    """Rows as a Markdown table, recall in percent."""
    keys = [k for k in rows[0] if k != "variant"]
    lines = ["| variant | " + " | ".join(keys) + " |", "|---|" + "---:|" * len(keys)]
    lines += [
        "| " + r["variant"] + " | " + " | ".join(f"{100 * r[k]:.1f}" for k in keys) + " |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"
