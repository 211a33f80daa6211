"""Retrieval modes as objects: the registry, auto's routing, and a mode added without editing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import BRIDGE_QUESTION

from qortex_core.errors import QueryError
from qortex_core.query import modes
from qortex_core.query.modes.base import QueryContext, Ranking
from qortex_core.query.retriever import Retriever


def test_registry_lists_every_mode_module_default_first():
    names = modes.names()
    assert names[0] == modes.DEFAULT == "auto"
    assert {"dense", "hipporag", "hybrid"} <= set(names)
    assert set(modes.eval_defaults()) <= set(names) and "dense" in modes.eval_defaults()
    for name in names:
        mode = modes.get(name)
        assert mode.name == name and mode.summary and callable(mode.rank)


def test_unknown_mode_names_the_known_ones():
    with pytest.raises(QueryError, match="unknown mode 'sideways': use one of auto, "):
        modes.get("sideways")
    with pytest.raises(QueryError, match="unknown mode"):
        modes.get(None)  # type: ignore[arg-type]


def _context(retriever: Retriever, text: str) -> QueryContext:
    return retriever.context(text, retriever.embedder.embed([text])[0])


def test_every_mode_ranks_every_passage(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    n = len(retriever.passages)
    for name in modes.names():
        ranking = modes.get(name).rank(_context(retriever, BRIDGE_QUESTION))
        assert ranking.scores.shape == (n,) and np.isfinite(ranking.scores).all()
        assert ranking.mode in modes.names() and ranking.mode != "auto"
        assert all(part.shape == (n,) for part in ranking.parts.values())


def test_auto_routes_to_a_registered_mode_and_ranks_as_it(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    auto = modes.get("auto").rank(_context(retriever, BRIDGE_QUESTION))
    assert auto.route.startswith("auto:") and auto.mode in modes.names()
    direct = modes.get(auto.mode).rank(_context(retriever, BRIDGE_QUESTION))
    np.testing.assert_array_equal(auto.scores, direct.scores)
    result = retriever.query(BRIDGE_QUESTION, top_k=3)
    assert result.mode == auto.mode and result.route == auto.route


def test_graph_modes_fall_back_to_dense_when_nothing_links(toy_home, embedder):
    retriever = Retriever.open(toy_home, embedder=embedder)
    text = "zxqv blorf"  # links no fact above the threshold
    dense = modes.get("dense").rank(_context(retriever, text))
    for name in ("hipporag", "hybrid"):
        ranking = modes.get(name).rank(_context(retriever, text))
        assert ranking.mode == "dense" and ranking.walked is None and "no fact" in ranking.note
        np.testing.assert_array_equal(ranking.scores, dense.scores)


@dataclass(frozen=True)
class ByTitleLength:
    """A toy mode: shorter titles first (nothing any real mode would do)."""

    name: str = "titlelength"
    summary: str = "shortest title first"
    in_eval: bool = False

    def rank(self, ctx: QueryContext) -> Ranking:
        length = np.array([len(p["title"]) for p in ctx.view.passages], np.float32)
        return Ranking(self.name, -length, {"title_length": length})


def test_a_registered_mode_is_served_everywhere(toy_home, embedder, monkeypatch):
    monkeypatch.setitem(modes.registry(), "titlelength", ByTitleLength())
    retriever = Retriever.open(toy_home, embedder=embedder)
    result = retriever.query(BRIDGE_QUESTION, top_k=3, mode="titlelength")
    lengths = [len(h.title) for h in result.passages]
    assert result.mode == "titlelength" and lengths == sorted(lengths)
    assert result.passages[0].breakdown["title_length"] == lengths[0]

    from qortex_cli.main import build_parser

    query_help = build_parser()._subparsers._group_actions[0].choices["query"].format_help()
    assert "titlelength" in " ".join(query_help.split())


def test_mcp_mode_enum_is_the_registry():
    from qortex_core.mcp_server import build_server

    [query_tool] = [t for t in asyncio.run(build_server().list_tools()) if t.name == "qortex_query"]
    assert query_tool.input_schema["properties"]["mode"]["enum"] == list(modes.names())
