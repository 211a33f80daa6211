"""The attribution check: a question about one participant whose best facts are about another."""

from __future__ import annotations

import numpy as np

from qortex_core.query.attribution import (
    AttributionConfig,
    Participants,
    check,
    named_in,
    without_name,
)

NAMES = ("Bo", "Inga")


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


# facts 0-1 are about Bo, 2-3 about Inga; axis 0 = baking, axis 1 = kayaks, axis 2 = weather
FACTS = np.stack([_unit(1, 0, 0.1), _unit(0.2, 0, 1), _unit(0, 1, 0.1), _unit(0, 0.3, 1)])
PEOPLE = Participants(NAMES, {"Bo": np.array([0, 1]), "Inga": np.array([2, 3])})


def _embedder(asked: list[str]):
    """Embeds by topic word, and records what it was asked to embed."""

    def embed(text: str) -> np.ndarray:
        asked.append(text)
        if "kayak" in text:
            return _unit(0, 1, 0)
        if "bake" in text:
            return _unit(1, 0, 0)
        return _unit(0, 0, 1)

    return embed


def test_names_found_as_whole_words_and_taken_out():
    assert named_in("What colour is Inga's kayak?", NAMES) == ["Inga"]
    assert named_in("Did Bob and Ingar meet?", NAMES) == []  # not whole words
    assert named_in("Did Bo meet Inga?", NAMES) == ["Bo", "Inga"]
    assert without_name("What colour is Inga's kayak?", "Inga") == "What colour is kayak?"
    assert without_name("Inga\u2019s kayak, Inga said", "Inga") == "kayak, said"


def test_question_about_the_wrong_participant_is_withheld():
    asked: list[str] = []
    wrong = check("What colour is Bo's kayak?", PEOPLE, FACTS, _embedder(asked))
    assert wrong is not None
    assert (wrong.named, wrong.holder) == ("Bo", "Inga")
    assert wrong.holder_cosine - wrong.named_cosine >= AttributionConfig().margin
    assert "said of Inga, not Bo" in wrong.note
    assert asked == ["What colour is kayak?"]  # the named participant is not part of the match


def test_question_about_the_right_participant_answers():
    assert check("What colour is Inga's kayak?", PEOPLE, FACTS, _embedder([])) is None
    assert check("What did Bo bake?", PEOPLE, FACTS, _embedder([])) is None


def test_a_close_call_answers_and_the_margin_decides():
    # the weather facts of both are about as close: within the margin nothing is withheld
    assert check("How was the weather for Bo?", PEOPLE, FACTS, _embedder([])) is None
    strict = AttributionConfig(margin=-0.5)  # any other participant's fact at all withholds
    assert check("How was the weather for Bo?", PEOPLE, FACTS, _embedder([]), strict) is not None


def test_no_check_without_exactly_one_named_participant_with_facts():
    asked: list[str] = []
    embed = _embedder(asked)
    assert check("What colour is the kayak?", PEOPLE, FACTS, embed) is None  # nobody named
    assert check("Did Bo see Inga's kayak?", PEOPLE, FACTS, embed) is None  # both named
    lone = Participants(NAMES, {"Inga": np.array([2, 3])})  # Bo is the subject of no fact
    assert check("What colour is Bo's kayak?", lone, FACTS, embed) is None
    assert check("What colour is Bo's kayak?", Participants((), {}), FACTS, embed) is None
    off = AttributionConfig(enabled=False)
    assert check("What colour is Bo's kayak?", PEOPLE, FACTS, embed, off) is None
    assert asked == []  # nothing was embedded when the check did not apply
