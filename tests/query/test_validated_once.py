"""Each query's inputs are checked once on its way through the retriever and the memory."""

from __future__ import annotations

from pathlib import Path

import pytest

import qortex_core
from qortex_core.errors import QueryError
from qortex_core.query import retriever as retriever_module
from qortex_core.query.retriever import Retriever


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts :func:`~qortex_core.query.validation.validate` was called with, in order."""
    seen: list[str] = []
    real = retriever_module.validate

    def counted(text, top_k, mode):
        seen.append(text)
        return real(text, top_k, mode)

    monkeypatch.setattr(retriever_module, "validate", counted)
    return seen


def test_a_retriever_query_is_validated_once(toy_home: Path, embedder, validations) -> None:
    retriever = Retriever.open(toy_home, embedder=embedder)
    result = retriever.query("  Where was Orlan Vesk born?  ", top_k=3)
    assert result.passages
    assert validations == ["  Where was Orlan Vesk born?  "]
    with pytest.raises(QueryError, match="empty"):
        retriever.query("   ")


def test_search_with_a_vector_is_validated_once(toy_home: Path, embedder, validations) -> None:
    retriever = Retriever.open(toy_home, embedder=embedder)
    vector = embedder.embed(["Where was Orlan Vesk born?"])[0]
    assert retriever.search("Where was Orlan Vesk born?", vector, top_k=3).passages
    assert len(validations) == 1


def test_a_memory_search_without_a_snapshot_is_validated_once(
    tmp_path: Path, embedder, validations
) -> None:
    mem = qortex_core.open(tmp_path / "home", embedder=embedder)
    mem.remember("The lighthouse keeper's cat is called Biscuit.")
    found = mem.search("What is the lighthouse cat called?", top_k=2)
    assert found.passages
    assert validations == ["What is the lighthouse cat called?"]
