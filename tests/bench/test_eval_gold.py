"""Gold passages matched against the corpus, and the HotpotQA / 2Wiki question form."""

from __future__ import annotations

import pytest
from conftest import TOY_CORPUS, write_file

from qortex_bench.datasets import (
    load_corpus,
    load_questions,
    match_gold,
    recall_at_k,
)
from qortex_bench.evaluate import EvalSetup, run_evaluation
from qortex_core.errors import DatasetError

CORPUS = [
    {"title": "Alder Moor", "text": "Alder Moor is a village.  It lies on the river Wend."},
    {"title": "Wend", "text": "The Wend is a river that rises in the Kell hills."},
    {"title": "Twin", "text": "First passage titled Twin."},
    {"title": "Twin", "text": "Second passage titled Twin."},
]


def _question(paragraphs: list[dict]) -> dict:
    return {
        "id": "q",
        "question": "Where does the river at Alder Moor rise?",
        "paragraphs": paragraphs,
    }


def test_exact_loose_title_and_missing_matches(tmp_path):
    questions = write_file(
        tmp_path,
        "q.json",
        [
            _question(
                [
                    {
                        "title": "Alder Moor",
                        "paragraph_text": "Alder Moor is a village.  It lies on the river Wend.",
                        "is_supporting": True,
                    },
                    {
                        "title": "wend ",
                        "paragraph_text": "the Wend is a river that rises in the  Kell hills.",
                        "is_supporting": True,
                    },
                ]
            ),
            _question(
                [
                    {
                        "title": "Wend",
                        "paragraph_text": "An older revision of the Wend article.",
                        "is_supporting": True,
                    },
                    {
                        "title": "Twin",
                        "paragraph_text": "A third text titled Twin.",
                        "is_supporting": True,
                    },
                    {
                        "title": "Alder Moor",
                        "paragraph_text": "not supporting",
                        "is_supporting": False,
                    },
                ]
            ),
        ],
    )
    passages = load_corpus(write_file(tmp_path, "c.json", CORPUS))
    matched, counts = match_gold(load_questions(questions), passages)
    assert counts == {"exact": 1, "loose": 1, "title": 1, "missing": 1}
    ids = {p.title + "|" + p.text[:5]: p.id for p in passages}
    assert matched[0].gold == (ids["Alder Moor|Alder"], ids["Wend|The W"])
    assert matched[1].gold[0] == ids["Wend|The W"]  # the only passage titled "Wend"
    assert matched[1].gold[1] not in {
        p.id for p in passages
    }  # two passages titled "Twin": no guess
    assert recall_at_k([ids["Wend|The W"]], matched[1].gold, 1) == 0.5


def test_context_and_supporting_facts_form(tmp_path):
    """HotpotQA / 2WikiMultiHopQA rows: gold = context paragraphs named in supporting_facts."""
    rows = [
        {
            "_id": "h1",
            "question": "Where does the river at Alder Moor rise?",
            "context": [
                ["Alder Moor", ["Alder Moor is a village.", "It lies on the river Wend."]],
                ["Wend", ["The Wend is a river that rises in the Kell hills."]],
                ["Twin", ["First passage titled Twin."]],
            ],
            "supporting_facts": [["Alder Moor", 1], ["Wend", 0]],
        }
    ]
    questions = load_questions(write_file(tmp_path, "h.json", rows))
    assert [q.id for q in questions] == ["h1"] and len(questions[0].gold) == 2
    matched, counts = match_gold(questions, load_corpus(write_file(tmp_path, "c.json", CORPUS)))
    assert (
        counts["missing"] == 0 and counts["exact"] == 1
    )  # "Wend" is exact; the joined Alder Moor text is loose
    with pytest.raises(DatasetError, match="nor 'context'"):
        load_questions(
            write_file(
                tmp_path,
                "bad.json",
                [
                    {
                        "question": "x?",
                        "context": [["t", "not a list"]],
                        "supporting_facts": [["t", 0]],
                    }
                ],
            )
        )


def test_eval_reports_how_gold_matched(tmp_path, embedder):
    """A questions file whose paragraphs differ from the corpus only in spacing still scores."""
    corpus = write_file(tmp_path, "corpus.json", TOY_CORPUS)
    para = dict(
        title=TOY_CORPUS[6]["title"],
        paragraph_text="  " + TOY_CORPUS[6]["text"].replace(" ", "  "),
        is_supporting=True,
    )
    questions = write_file(
        tmp_path,
        "q.json",
        [{"id": "p", "question": "What does the painter Ivo Lark paint?", "paragraphs": [para]}],
    )
    report = run_evaluation(
        EvalSetup(
            questions, corpus, tmp_path / "home", extractor="offline", modes=("dense",), ks=(1,)
        ),
        embedder=embedder,
    )
    assert report["gold_matched"] == {"exact": 0, "loose": 1, "title": 0, "missing": 0}
    assert report["results"]["dense"]["recall@1"] == 1.0


def test_single_hop_steps(tmp_path):
    paragraphs = [
        {
            "idx": 0,
            "title": "Alder Moor",
            "paragraph_text": CORPUS[0]["text"],
            "is_supporting": True,
        },
        {"idx": 1, "title": "Wend", "paragraph_text": CORPUS[1]["text"], "is_supporting": True},
    ]
    steps = [
        {
            "question": "Which river runs past Alder Moor?",
            "answer": "Wend",
            "paragraph_support_idx": 0,
        },
        {"question": "Where does #1 rise?", "answer": "Kell hills", "paragraph_support_idx": 1},
        {"question": "#2 >> country", "answer": "Norland", "paragraph_support_idx": 1},
        {"question": "Who named #2?", "answer": "?", "paragraph_support_idx": 7},
    ]
    path = write_file(
        tmp_path, "q.json", [dict(_question(paragraphs), question_decomposition=steps)]
    )
    hops = load_questions(path, single_hop=True)
    assert [(q.id, q.text) for q in hops] == [
        ("q/1", "Which river runs past Alder Moor?"),
        ("q/2", "Where does Wend rise?"),
    ]
    passages = load_corpus(write_file(tmp_path, "c.json", CORPUS))
    assert [q.gold for q in hops] == [(passages[0].id,), (passages[1].id,)]
    assert len(load_questions(path)) == 1  # without the flag: the multi-hop question
    with pytest.raises(DatasetError, match="no 'question_decomposition'"):
        load_questions(write_file(tmp_path, "plain.json", [_question(paragraphs)]), single_hop=True)
