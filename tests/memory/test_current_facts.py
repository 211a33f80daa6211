"""What is true now, when the phrasings share no word: supersession by values of one kind,
current-fact ranking that inherits a chain's attribute, the held-out generator. Real LanceDB
homes and the bundled embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import qortex_core
from qortex_bench.updates import load_updates
from qortex_bench.updates_synth import generate, main
from qortex_core.memory.statements import parse

T = "2023-0{}-01T09:00:00Z"


@pytest.fixture
def mem(tmp_path: Path, embedder):
    return qortex_core.open(tmp_path / "home", embedder=embedder)


def _write(mem, *facts):
    return [mem.remember(text, time=when) for text, when in facts]


def _top(mem, query: str, **kw) -> str:
    return mem.search(query, top_k=5, min_relevance=0, **kw).passages[0].text


def test_a_leading_clause_is_not_the_subject():
    said = parse("After years in Nantes, Ada Castillo settled in Seville.")
    assert said.subject == {"ada", "castillo"} and said.values == {"nantes", "seville"}
    assert parse("Ada Olsen's phone is a Pixel 7.").phrases == {"pixel 7"}


def test_values_of_one_kind_link_phrasings_that_share_no_word(mem):
    # Two other people show that both frames hold cities.
    _write(mem, ("Hugo Sato resides in Oslo.", T.format(1)), ("Mina Weber now calls Oslo home.",
           T.format(2)))  # fmt: skip
    old, new = _write(mem, ("Ines Moreau resides in Quito.", T.format(3)),
                      ("Ines Moreau now calls Turin home.", T.format(5)))  # fmt: skip
    assert mem.get(old.id).superseded_by == new.id
    assert _top(mem, "In which city does Ines Moreau reside at present?") == new.text


def test_values_of_different_kinds_do_not_link_alike_sentences(mem):
    job, phone = _write(mem, ("Lucia Kaplan has a job at Orbit Telecom.", T.format(1)),
                        ("Lucia Kaplan's phone is a Fairphone 4.", T.format(4)))  # fmt: skip
    assert mem.get(job.id).superseded_by is None and mem.get(phone.id).superseded_by is None
    assert _top(mem, "Which company employs Lucia Kaplan today?") == job.text


def test_people_as_values_are_of_one_kind(mem):
    _write(mem, ("Ines Sato plays the harp.", T.format(1)), ("Hugo Olsen plays the oboe.",
           T.format(1)))  # fmt: skip
    old, new = _write(mem, ("Tomas Rahman is supervised by Hugo Olsen.", T.format(2)),
                      ("Tomas Rahman's team lead changed to Ines Sato.", T.format(6)))  # fmt: skip
    assert mem.get(old.id).superseded_by == new.id


def test_the_successor_inherits_the_attribute_its_chain_was_asked_by(mem):
    first, later, _ = _write(
        mem,
        ("Rosa Mendel works at Orchid Games.", T.format(1)),
        ("Rosa Mendel left Orchid Games and started at Vertex Energy.", T.format(5)),
        ("Rosa Mendel relocated from Graz to Bergen last month.", T.format(6)),
    )
    assert mem.get(first.id).superseded_by == later.id
    assert _top(mem, "Who is Rosa Mendel's current employer?") == later.text


def test_an_unlinked_newer_statement_of_the_asked_kind_still_wins(mem):
    old, new = _write(
        mem,
        ("Idris Moreau is employed by Marlow Foods.", T.format(1)),
        ("Idris Moreau accepted an offer from Sunfield Insurance.", T.format(6)),
    )
    assert mem.get(old.id).superseded_by is None  # nothing yet says both hold companies
    _write(mem, ("Ada Sato is employed by Halcyon Bio.", T.format(2)),
           ("Olek Weber accepted an offer from Halcyon Bio.", T.format(3)))  # fmt: skip
    assert _top(mem, "Which company employs Idris Moreau today?") == new.text
    assert _top(mem, "Which company employed Idris Moreau?", as_of=T.format(3)) == old.text


def test_the_held_out_generator_is_deterministic_and_of_the_format(tmp_path: Path):
    assert generate(5) == generate(5) and generate(5) != generate(6)
    main([str(tmp_path / "held.json"), "--seed", "5"])
    data = load_updates(tmp_path / "held.json")
    kinds = {q.kind for q in data.questions}
    assert kinds == {"current", "as_of", "unchanged"} and len(data.memories) > 200
    when = {m[0]: m[2] for m in data.memories}
    for q in data.questions:
        if q.kind == "as_of":  # the gold was said before the date, its successor after
            assert when[q.gold[0]] <= q.as_of and all(
                when[s] > q.as_of for s in q.stale if when[s] > when[q.gold[0]]
            )
    dev_names = {"Goran", "Lindqvist", "Okafor", "Tanaka"}
    assert not dev_names & set(json.dumps(generate(5)).replace(".", " ").split())


def test_the_recent_profile_orders_by_event_time_in_both_tiers(mem, embedder):
    from qortex_bench.locomo_memory import consolidate_home
    from qortex_core.ingest.extract import OfflineExtractor

    old, middle, new = _write(
        mem,
        ("We booked a kayak trip on the lake for the whole team.", "2021-05-01T09:00:00Z"),
        ("Somebody asked where to rent a kayak near the lake.", "2022-05-01T09:00:00Z"),
        ("The kayak on the lake had a leak.", "2023-05-01T09:00:00Z"),
    )
    query = "We booked a kayak trip on the lake for the whole team"
    for _ in ("fresh", "graph"):
        plain = [h.text for h in mem.search(query, top_k=3, min_relevance=0).passages]
        recent = mem.search(query, top_k=3, min_relevance=0, profile="recent").passages
        assert plain[0] == old.text and recent[0].text == new.text
        as_of = mem.search(query, top_k=3, min_relevance=0, profile="recent", as_of="2022-06-01")
        assert as_of.passages[0].text == middle.text
        consolidate_home(Path(mem.home), embedder, None, OfflineExtractor())


@pytest.mark.parametrize(
    "question, moment",
    [
        ("Where did Ines live in October 2023?", "2023-10-16T12:00:00Z"),
        ("Who employed Ines during the summer of 2023?", "2023-07-16T12:00:00Z"),
        ("Where did Ines live last spring?", "2024-04-16T00:00:00Z"),
        ("Which car did Ines drive two years ago?", "2022-11-28T05:00:00Z"),
        ("Who was Ines's lead last May?", "2024-05-16T12:00:00Z"),
        ("Where does Ines live now?", None),
        ("May Ines come along?", None),
    ],
)
def test_the_time_a_question_names_relative_to_when_it_was_asked(question, moment):
    from qortex_core.memory.asked_time import moment_of

    assert moment_of(question, "2024-11-27T17:00:00Z") == moment


def test_a_question_naming_a_time_answers_as_of_it_without_as_of(mem):
    old, new = _write(mem, ("Ines Moreau lives in Quito.", "2023-01-01T09:00:00Z"),
                      ("Ines Moreau moved to Turin.", "2024-03-01T09:00:00Z"))  # fmt: skip
    asked = "2024-11-27T17:00:00Z"
    assert _top(mem, "Where did Ines Moreau live in October 2023?", asked_at=asked) == old.text
    assert _top(mem, "Where did Ines Moreau live last summer?", asked_at=asked) == new.text
    assert _top(mem, "Where does Ines Moreau live now?", asked_at=asked) == new.text


def test_conversation_turns_do_not_supersede_each_other(mem):
    turns = _write(
        mem,
        ("Caroline: Thanks Mel! Your kind words mean a lot. Sharing is not easy.", T.format(1)),
        ("Melanie: Yeah, Caroline! It takes courage to talk about our own stories.", T.format(2)),
        ("Caroline: Thanks, Melanie. Art gives me a sense of freedom. So do friends.", T.format(3)),
        ("Melanie: Wow, Caroline, that sounds super rewarding! Care to share more?", T.format(4)),
    )
    assert all(mem.get(t.id).superseded_by is None for t in turns)
    assert len(mem.list()) == 4


def test_numbered_notes_are_subjects_of_their_own(mem):
    notes = _write(
        mem,
        ("Note 12: the pump near the bridge was inspected by crew K00012.", T.format(1)),
        ("Note 13: the pump near the mill was inspected by crew K00013.", T.format(2)),
    )
    assert parse(notes[0].text).subject == {"note", "12"}
    assert all(mem.get(n.id).superseded_by is None for n in notes)
