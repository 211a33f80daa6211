"""Evaluation: recall@k by hand, HippoRAG-format loading, and run_evaluation end to end on a toy corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import (
    BRIDGE_GOLD,
    BRIDGE_QUESTION,
    TOY_CORPUS,
    TOY_QUESTIONS,
    TOY_TRIPLES,
    openie_document,
    write_file,
)

from qortex_bench.datasets import (
    Question,
    load_corpus,
    load_questions,
    match_gold,
    mean_recall,
    recall_at_k,
)
from qortex_bench.evaluate import EvalSetup, run_evaluation
from qortex_core.errors import DatasetError, QueryError
from qortex_core.ingest.extract import RecordedExtractor, clean_triple, load_openie

BENCH = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "musique_100"


# -- recall@k -----------------------------------------------------------------------------
def test_recall_at_k_by_hand():
    ranked = ["a", "x", "b", "y", "c"]
    assert recall_at_k(ranked, ["a", "b"], 1) == 0.5
    assert recall_at_k(ranked, ["a", "b"], 2) == 0.5
    assert recall_at_k(ranked, ["a", "b"], 3) == 1.0
    assert recall_at_k(ranked, ["c", "z", "b"], 5) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, ["z"], 10) == 0.0
    assert recall_at_k([], ["a"], 5) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, [], 5)


def test_mean_recall_on_two_questions_by_hand():
    questions = [Question("q1", "first?", ("a", "b")), Question("q2", "second?", ("c",))]
    rankings = [["a", "c", "b"], ["b", "a", "c"]]
    # q1: R@1 1/2, R@2 1/2, R@3 1; q2: R@1 0, R@2 0, R@3 1
    assert mean_recall(rankings, questions, (1, 2, 3)) == {
        "recall@1": 0.25,
        "recall@2": 0.25,
        "recall@3": 1.0,
    }


# -- loading ------------------------------------------------------------------------------
def test_load_toy_dataset(toy_dataset):
    questions = load_questions(toy_dataset.questions)
    passages = load_corpus(toy_dataset.corpus)
    assert [q.id for q in questions] == ["q_bridge", "q_painter"]
    assert questions[0].text == BRIDGE_QUESTION
    by_title = {p.title: p.id for p in passages}
    assert questions[0].gold == tuple(by_title[t] for t in BRIDGE_GOLD)
    assert questions[1].gold == (by_title["Ivo Lark"],)
    assert (
        len(passages) == len(TOY_CORPUS)
        and passages[1].full_text == "Ostrania\n" + TOY_CORPUS[1]["text"]
    )
    gold = sum(len(q.gold) for q in questions)
    assert (
        match_gold(questions, passages)[1]["exact"] == gold
    )  # every gold passage matched on title + text
    assert match_gold(questions, passages[1:])[1] == {
        "exact": gold - 1,
        "loose": 0,
        "title": 0,
        "missing": 1,
    }  # "Orlan Vesk" is gone


def test_load_openie_format(toy_dataset):
    records = load_openie(toy_dataset.openie)
    assert len(records) == len(TOY_CORPUS)
    assert records["Orlan Vesk\n" + TOY_CORPUS[0]["text"]] == [
        ("Orlan Vesk", "is a", "composer"),
        ("Orlan Vesk", "born in", "Ostrania"),
    ]
    extractor = RecordedExtractor(toy_dataset.openie)
    passages = load_corpus(toy_dataset.corpus)
    extraction = extractor.extract(passages[:1])[0]
    assert {(f.subject, f.predicate, f.object) for f in extraction.facts} == {
        ("Orlan Vesk", "is a", "composer"),
        ("Orlan Vesk", "born in", "Ostrania"),
    }
    assert {c.name for c in extraction.concepts} == {"Orlan Vesk", "composer", "Ostrania"}
    assert extractor.misses == 0


def test_clean_triple():
    assert clean_triple(["  Orlan   Vesk ", "born\nin", "Ostrania"]) == (
        "Orlan Vesk",
        "born in",
        "Ostrania",
    )
    assert clean_triple(["Serra", "founded in", 1921]) == ("Serra", "founded in", "1921")
    for bad in (
        ["a", "b"],
        ["a", "b", "c", "d"],
        "abc",
        None,
        ["a", "b", None],
        ["a", "b", ["c"]],
        ["!!", "is", "x"],
        ["x", "is", "  "],
        {"s": 1},
    ):
        assert clean_triple(bad) is None, bad


def test_malformed_triples_are_skipped_not_fatal(tmp_path):
    doc = openie_document(TOY_CORPUS[:1], [[["Orlan Vesk", "born in", "Ostrania"]]])
    doc["docs"][0]["extracted_triples"] += [["broken"], None, ["", "x", "y"], "a b c"]
    path = tmp_path / "openie.json"
    path.write_text(json.dumps(doc))
    assert list(load_openie(path).values()) == [[("Orlan Vesk", "born in", "Ostrania")]]


@pytest.mark.skipif(not BENCH.is_dir(), reason="shared benchmark data not present")
def test_load_musique_100():
    questions = load_questions(BENCH / "musique_100.json")
    passages = load_corpus(BENCH / "musique_100_corpus.json")
    assert (len(questions), len(passages)) == (100, 1890)
    assert all(2 <= len(q.gold) <= 4 for q in questions)
    assert match_gold(questions, passages)[1]["exact"] == sum(len(q.gold) for q in questions)


# -- bad files through the library ----------------------------------------------------------
BAD_FILES = {
    "empty file": "",
    "not json": "{this is not json",
    "binary": b"\xff\xfe\x00\x01garbage",
    "empty list": [],
    "object not list": {"question": "x"},
    "null": None,
    "list of strings": ["what?"],
}
GOOD_PARAGRAPH = {"title": "T", "paragraph_text": "text", "is_supporting": True}
BAD_QUESTIONS = dict(
    BAD_FILES,
    **{
        "no question": [{"paragraphs": [GOOD_PARAGRAPH]}],
        "blank question": [{"question": "   ", "paragraphs": [GOOD_PARAGRAPH]}],
        "no paragraphs": [{"question": "why?"}],
        "paragraph not object": [{"question": "why?", "paragraphs": ["text"]}],
        "no supporting paragraph": [
            {"question": "why?", "paragraphs": [dict(GOOD_PARAGRAPH, is_supporting=False)]}
        ],
        "supporting without text": [
            {"question": "why?", "paragraphs": [{"title": "T", "is_supporting": True}]}
        ],
    },
)
BAD_CORPUS = dict(
    BAD_FILES,
    **{
        "no text": [{"title": "T"}],
        "text not string": [{"title": "T", "text": 5}],
        "title not string": [{"title": ["T"], "text": "x"}],
        "blank text": [{"title": "T", "text": "  \n "}],
        "questions file": TOY_QUESTIONS,
    },
)
BAD_OPENIE = {
    "empty file": "",
    "not json": "{oops",
    "binary": b"\xff\xfe\x00",
    "list": [],
    "no docs": {"ents_by_doc": []},
    "empty docs": {"docs": []},
    "docs not list": {"docs": {"a": 1}},
    "doc without passage": {"docs": [{"title": "T"}]},
    "triples not list": {"docs": [{"passage": "T\nx", "extracted_triples": "a b c"}]},
    "corpus file": TOY_CORPUS,
}


@pytest.mark.parametrize("case", sorted(BAD_QUESTIONS))
def test_bad_questions_file(tmp_path, case):
    path = write_file(tmp_path, "questions.json", BAD_QUESTIONS[case])
    with pytest.raises(DatasetError, match="questions"):
        load_questions(path)


@pytest.mark.parametrize("case", sorted(BAD_CORPUS))
def test_bad_corpus_file(tmp_path, case):
    path = write_file(tmp_path, "corpus.json", BAD_CORPUS[case])
    with pytest.raises(DatasetError, match="corpus"):
        load_corpus(path)


@pytest.mark.parametrize("case", sorted(BAD_OPENIE))
def test_bad_openie_file(tmp_path, case):
    path = write_file(tmp_path, "openie.json", BAD_OPENIE[case])
    with pytest.raises(DatasetError, match="OpenIE"):
        load_openie(path)


@pytest.mark.parametrize("loader", [load_questions, load_corpus, load_openie])
def test_missing_file_and_directory(tmp_path, loader):
    with pytest.raises(DatasetError, match="not found"):
        loader(tmp_path / "nope.json")
    with pytest.raises(DatasetError):
        loader(tmp_path)


def test_jsonl_corpus(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in TOY_CORPUS[:2]) + "\n\n")
    assert [p.title for p in load_corpus(path)] == ["Orlan Vesk", "Ostrania"]
    path.write_text(json.dumps(TOY_CORPUS[0]) + "\n\n" + '{"title": "x", "text": ' + "\n")
    with pytest.raises(DatasetError, match="not valid JSON: .* at line 3"):
        load_corpus(path)


# -- run_evaluation -------------------------------------------------------------------------
def test_report_shape(toy_report):
    r = toy_report
    assert (r["questions"], r["passages"]) == (len(TOY_QUESTIONS), len(TOY_CORPUS))
    assert set(r["results"]) == {"dense", "hipporag"}
    for mode, scores in r["results"].items():
        assert list(scores) == ["recall@1", "recall@2", "recall@5", "recall@10"]
        values = list(scores.values())
        assert all(0.0 <= v <= 1.0 for v in values)
        assert values == sorted(values), f"{mode}: recall@k cannot drop as k grows"
        assert scores["recall@10"] == 1.0  # 8 passages: everything is in the top 10
    for key in (
        "load_s",
        "extract_s",
        "embed_s",
        "graph_s",
        "total_s",
        "dense_ms_per_query",
        "hipporag_ms_per_query",
    ):
        assert r["timings"][key] >= 0.0
    assert r["gold_missing_from_corpus"] == 0
    assert r["fallbacks"] == {"dense": 0, "hipporag": 0}
    assert r["openie_covered_passages"] == len(TOY_CORPUS)
    assert r["index"]["facts"] == len({tuple(t) for rows in TOY_TRIPLES for t in rows})
    assert r["snapshot"].startswith("v000001-")
    json.dumps(r)  # the CLI writes it as JSON


def test_bridge_passage_is_found_by_the_graph(toy_report, toy_home, embedder):
    """The bridge passage never names the question's entity: dense misses it at 2, hipporag finds it."""
    from qortex_core.query.retriever import Retriever

    assert toy_report["results"]["hipporag"]["recall@2"] == 1.0
    assert toy_report["results"]["dense"]["recall@2"] < 1.0
    retriever = Retriever.open(toy_home, embedder=embedder)
    dense = retriever.query(BRIDGE_QUESTION, top_k=2, mode="dense")
    graph = retriever.query(BRIDGE_QUESTION, top_k=2, mode="hipporag")
    assert graph.fallback is None
    assert [h.title for h in graph.passages] == list(BRIDGE_GOLD)
    assert "Ostrania" not in [h.title for h in dense.passages]
    bridge = graph.passages[1]
    assert {"Ostrania", "Velmora"} & set(bridge.seeds), (
        "the bridge is reached through its phrase nodes"
    )
    assert "Orlan Vesk" in {s.name for s in graph.seeds}


def test_rerun_is_incremental(toy_home, embedder, tmp_path):
    from conftest import write_toy_dataset

    data = write_toy_dataset(tmp_path / "again")
    report = run_evaluation(
        EvalSetup(
            data.questions, data.corpus, toy_home, data.openie, "recorded", ("dense",), (1, 5)
        ),
        embedder=embedder,
    )
    assert report["index"]["texts_embedded"] == 0
    assert report["index"]["extracted"] == 0 and report["index"]["cached_extractions"] == len(
        TOY_CORPUS
    )
    assert list(report["results"]) == ["dense"] and list(report["results"]["dense"]) == [
        "recall@1",
        "recall@5",
    ]
    assert report["snapshot"].startswith("v000001-")  # unchanged inputs: nothing new is published


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"modes": ("dense", "bogus")}, QueryError, "unknown mode 'bogus'"),
        ({"modes": ()}, QueryError, "no retrieval mode"),
        ({"ks": ()}, QueryError, "no recall cut-off"),
        ({"ks": (1, 0)}, QueryError, "out of range"),
        ({"ks": (5, 1000)}, QueryError, "out of range"),
        ({"extractor": "magic"}, DatasetError, "unknown extractor"),
        ({"openie": None}, DatasetError, "needs --openie"),
    ],
)
def test_bad_setup_fails_before_any_work(toy_dataset, tmp_path, kwargs, error, match):
    home = tmp_path / "home"
    setup = dict(
        questions=toy_dataset.questions,
        corpus=toy_dataset.corpus,
        home=home,
        openie=toy_dataset.openie,
    )
    with pytest.raises(error, match=match):
        run_evaluation(EvalSetup(**dict(setup, **kwargs)))
    assert not home.exists()


def test_openie_of_another_corpus_is_rejected(toy_dataset, tmp_path):
    other = write_file(
        tmp_path,
        "openie_other.json",
        openie_document([{"title": "X", "text": "Y"}], [[["X", "is", "Y"]]]),
    )
    home = tmp_path / "home"
    with pytest.raises(DatasetError, match="no entry for any of the 8 corpus passages"):
        run_evaluation(
            EvalSetup(toy_dataset.questions, toy_dataset.corpus, home, other, "recorded")
        )
    assert not home.exists()


def test_questions_of_another_corpus_are_rejected(toy_dataset, tmp_path):
    corpus = write_file(tmp_path, "other_corpus.json", [{"title": "X", "text": "Y"}])
    with pytest.raises(DatasetError, match="none of the gold passages"):
        run_evaluation(EvalSetup(toy_dataset.questions, corpus, tmp_path / "home", None, "offline"))


def test_edited_openie_file_is_not_served_from_the_cache(toy_home, embedder, tmp_path):
    """Same file name, new content: the extraction cache must not replay the old triples."""
    from conftest import write_toy_dataset

    from qortex_core.storage import snapshot as snap

    data = write_toy_dataset(tmp_path / "edited")
    doc = json.loads(data.openie.read_text())
    doc["docs"][1]["extracted_triples"] = [["Ostrania", "has capital", "Velmora"]]
    data.openie.write_text(json.dumps(doc))
    report = run_evaluation(
        EvalSetup(data.questions, data.corpus, toy_home, data.openie, "recorded", ("dense",), (1,)),
        embedder=embedder,
    )
    assert report["index"]["extracted"] == len(TOY_CORPUS)
    facts = snap.load(toy_home).tables["facts"]
    triples = set(
        zip(
            facts["subject"].to_pylist(),
            facts["predicate"].to_pylist(),
            facts["object"].to_pylist(),
        )
    )
    assert ("Ostrania", "has capital", "Velmora") in triples
    assert ("Ostrania", "governed from", "Velmora") not in triples


def test_eval_refuses_a_home_with_ingested_memory(toy_home, toy_dataset, embedder):
    """Evaluating into a memory home would prune its chunks and move LATEST: refuse, change nothing."""
    import pyarrow as pa

    from qortex_core.errors import HomeError
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.store import LanceStore

    LanceStore.open(toy_home).upsert(
        "documents", pa.table({"id": ["notes/a.md"], "signature": ["x"]})
    )
    before = (snap.latest_name(toy_home), LanceStore.open(toy_home).versions())
    with pytest.raises(HomeError, match="holds ingested memory"):
        run_evaluation(
            EvalSetup(toy_dataset.questions, toy_dataset.corpus, toy_home, toy_dataset.openie),
            embedder=embedder,
        )
    assert (snap.latest_name(toy_home), LanceStore.open(toy_home).versions()) == before


def test_eval_reruns_on_a_home_that_was_queried(toy_home, toy_dataset, embedder):
    """Queries only leave traces (query_log); they do not make an eval home a memory home."""
    from qortex_core.query.retriever import Retriever
    from qortex_core.storage.store import QUERY_LOG, LanceStore

    retriever = Retriever.open(toy_home, embedder=embedder)
    retriever.query(BRIDGE_QUESTION, top_k=2)
    retriever.memory.flush()
    assert LanceStore.open(toy_home).count(QUERY_LOG) >= 1
    report = run_evaluation(
        EvalSetup(toy_dataset.questions, toy_dataset.corpus, toy_home, toy_dataset.openie),
        embedder=embedder,
    )
    assert (
        report["questions"] == len(TOY_QUESTIONS) and report["results"]["hipporag"]["recall@10"] > 0
    )


def test_cli_eval_writes_the_json_report(toy_dataset, tmp_path, capsys, monkeypatch):
    """``qortex eval ... --json OUT`` (through main, in this process): stdout and OUT hold the same report."""
    from qortex_cli import main as cli

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "report.json"
    code = cli.main(
        [
            "eval",
            "--questions",
            str(toy_dataset.questions),
            "--corpus",
            str(toy_dataset.corpus),
            "--openie",
            str(toy_dataset.openie),
            "--home",
            str(tmp_path / "home"),
            "--k",
            "1,2",
            "--modes",
            "dense,hipporag",
            "--json",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(out.read_text())
    assert json.loads(captured.out) == report
    assert report["extractor"].startswith(
        "recorded/"
    )  # --openie without --extractor means recorded
    assert {m: list(r) for m, r in report["results"].items()} == {
        "dense": ["recall@1", "recall@2"],
        "hipporag": ["recall@1", "recall@2"],
    }
    assert report["results"]["hipporag"]["recall@2"] == 1.0
    assert "extract" in captured.err  # progress goes to stderr, the report to stdout
