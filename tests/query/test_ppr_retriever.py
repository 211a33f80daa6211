"""The retriever's own PPR tolerance on a real (toy) snapshot: still a certified L1 bound against
a float64 solve, fewer products than a tight one, and the same rankings."""

from __future__ import annotations

import dataclasses

import numpy as np

from qortex_core.query.ppr.cg import conjugate_gradient
from qortex_core.query.ppr.solve import PPRConfig, personalized_pagerank
from qortex_core.query.retriever import Retriever
from tests.conftest import TOY_QUESTIONS
from tests.query.test_ppr_fast import exact_ppr

TEXTS = [q["question"] for q in TOY_QUESTIONS] + [
    "Which composer was born in the capital of Dravia?",
    "Where does the parliament of Ostrania sit?",
    "Which concert venue is in Lune?",
]


def _teleports(retriever: Retriever) -> list[np.ndarray]:
    """(n_nodes,) teleport of every text that links a fact."""
    texts = TEXTS
    out = []
    for text, vector in zip(texts, retriever.embedder.embed(texts)):
        dense = retriever.passage_vectors @ vector  # (n_passages,)
        teleport = retriever.seed(text, vector, dense).teleport
        if teleport is not None:
            out.append(teleport)
    return out


def test_default_tolerance_is_a_certified_l1_bound_on_a_real_snapshot(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    config = retriever.config.ppr
    assert config.tol >= 1e-4  # looser than PPRConfig's own default: the bound must still hold
    adjacency = retriever.adjacency.toarray()
    teleports = _teleports(retriever)
    assert teleports
    for t in teleports:
        got = personalized_pagerank(retriever.walk, t, config)  # (n_nodes,) float32
        want = exact_ppr(adjacency, t)  # float64 dense solve
        assert np.abs(got.astype(np.float64) - want).sum() <= config.tol
        # the tight tolerance's answer is closer, and the loose one took fewer products
        tight = personalized_pagerank(retriever.walk, t, PPRConfig(tol=1e-7))
        assert np.abs(tight.astype(np.float64) - want).sum() <= 1e-6
        norm = (t / t.sum())[:, None].astype(np.float32)
        loose = conjugate_gradient(retriever.walk, norm, config.damping, config.tol, 100)[1]
        assert loose < conjugate_gradient(retriever.walk, norm, config.damping, 1e-7, 100)[1]


def test_default_tolerance_ranks_as_a_tight_one(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    tight = Retriever.open(
        toy_home,
        embedder=embedder,
        config=dataclasses.replace(retriever.config, ppr=PPRConfig(tol=1e-9, max_iter=500)),
    )
    for text, vector in zip(TEXTS, embedder.embed(TEXTS)):
        for mode in ("hipporag", "textwalk"):
            got = [h.id for h in retriever.search(text, vector, top_k=8, mode=mode).passages]
            want = [h.id for h in tight.search(text, vector, top_k=8, mode=mode).passages]
            assert got == want
