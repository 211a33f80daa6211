"""``textwalk``: the best text passages seed the walk; ``auto`` takes it on conversations."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.stages import build_index
from qortex_core.query import modes
from qortex_core.query.config import RetrievalConfig, TextWalkConfig
from qortex_core.query.modes.textwalk import text_teleport, with_fact_seeds
from qortex_core.query.retriever import Retriever
from qortex_core.storage.model import Passage
from qortex_core.storage.store import LanceStore

WHEN = "2023-05-08T13:56:00Z"
# a conversation: the answer ("a shiba inu") shares no word with the question about Miso
CHAT = [
    "Ann: we adopted a puppy last week, his name is Miso",
    "Ben: that is wonderful, what breed is Miso?",
    "Ann: shiba inu, stubborn as anything",
    "Ben: my cousin trains horses near the coast",
    "Ann: horses are lovely, do you ride?",
    "Ben: only once, I fell off at a farm",
    "Ann: the weather was awful on our camping trip",
    "Ben: camping in the rain is still fun",
    "Ann: I started painting landscapes in oil",
    "Ben: you should show me a painting sometime",
    "Ann: a dog that barks all night is the worst",
]
QUESTION = "What breed is Ann's dog Miso?"


def _home(root, embedder, doc_id) -> Retriever:
    turns = [Passage(t, "", doc_id(n), time=WHEN) for n, t in enumerate(CHAT, 1)]
    build_index(LanceStore.open(root), root, turns, OfflineExtractor(), embedder)
    return root


@pytest.fixture(scope="module")
def chat_home(tmp_path_factory, embedder):
    return _home(tmp_path_factory.mktemp("chat"), embedder, lambda n: f"chat#D1:{n}")


def _textwalk(home, embedder, **textwalk):
    retriever = Retriever.open(
        home, embedder=embedder, config=RetrievalConfig(textwalk=TextWalkConfig(**textwalk))
    )
    ctx = retriever.context(QUESTION, embedder.embed([QUESTION])[0])
    row = {p["text"]: i for i, p in enumerate(retriever.view.passages)}
    return modes.get("textwalk").rank(ctx), row


def test_text_teleport_puts_mass_on_the_best_passages_only():
    text = np.array([0.1, 0.9, 0.5, 0.2], np.float32)
    teleport = text_teleport(text, n_phrases=3, seeds=2)
    assert teleport.shape == (7,) and not teleport[:3].any()
    assert teleport[3 + 1] > teleport[3 + 2] > 0 and teleport[3] == teleport[3 + 3] == 0


def test_fact_seeds_add_their_share_of_restart_mass():
    text = np.array([0, 0, 0, 3, 1], np.float32)  # two phrases, then three passages
    facts = np.array([2, 2, 0, 0, 0], np.float32)
    both = with_fact_seeds(text, facts, weight=1.0)
    np.testing.assert_allclose(both, [0.5, 0.5, 0, 0.75, 0.25])  # each half of the mass
    np.testing.assert_allclose(with_fact_seeds(text, facts, 0.5), [0.25, 0.25, 0, 0.75, 0.25])
    np.testing.assert_array_equal(with_fact_seeds(text, None, 1.0), text)  # no linked fact
    np.testing.assert_array_equal(with_fact_seeds(text, np.zeros(5, np.float32), 1.0), text)


def test_the_walk_reaches_the_reply_to_the_turns_the_query_names(chat_home, tmp_path, embedder):
    answer, elsewhere = CHAT[2], CHAT[-1]  # the reply; a dog turn far away, more like the query
    ranking, row = _textwalk(chat_home, embedder, seeds=2)
    text, ppr = ranking.parts["text"], ranking.parts["ppr"]
    assert text[row[elsewhere]] > text[row[answer]]  # by words and meaning: the wrong turn
    assert ppr[row[answer]] > 10 * ppr[row[elsewhere]]  # by the walk: the neighbour of the seeds
    assert ranking.scores[row[answer]] > text[row[answer]]
    flat = _home(tmp_path / "docs", embedder, lambda n: f"note{n}.md")  # same turns, no sequence
    unlinked, frow = _textwalk(flat, embedder, seeds=2)
    assert unlinked.parts["ppr"][frow[answer]] < ppr[row[answer]] / 2
    still, _ = _textwalk(chat_home, embedder, seeds=2, walk_weight=0)
    np.testing.assert_allclose(still.scores, text)  # no walk weight: the text order


def test_auto_takes_textwalk_on_a_conversation_only(chat_home, toy_home, embedder):
    chat = Retriever.open(chat_home, embedder=embedder)
    assert chat.view.sequenced == 1.0
    result = chat.query(QUESTION, top_k=3)
    assert result.mode == "textwalk" and "conversation turns" in result.route
    ctx = chat.context(QUESTION, embedder.embed([QUESTION])[0])
    np.testing.assert_array_equal(
        modes.get("auto").rank(ctx).scores, modes.get("textwalk").rank(ctx).scores
    )
    never = Retriever.open(
        chat_home, embedder=embedder, config=RetrievalConfig(textwalk=TextWalkConfig(route_share=2))
    )
    assert never.query(QUESTION, top_k=3).mode != "textwalk"
    docs = Retriever.open(toy_home, embedder=embedder)  # an encyclopedia: no sequence
    assert docs.view.sequenced == 0.0
    assert docs.query("Who founded the company?", top_k=3).mode != "textwalk"
