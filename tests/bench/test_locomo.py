"""LoCoMo: the loader on a tiny conversation written here, and the evaluation end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qortex_bench.locomo import (
    LocomoSetup,
    evidence_recall,
    load_conversation,
    normalize_evidence,
    run_locomo,
    session_time,
    turn_passage,
)
from qortex_cli.main import main
from qortex_core.errors import DatasetError
from qortex_core.storage.tenants import tenant_home

# Two sessions between invented people; facts the embedder cannot know beforehand.
TINY = {
    "speaker_a": "Bo",
    "speaker_b": "Inga",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Bo", "dia_id": "D1:1", "text": "Hi Inga! How was your week?"},
        {
            "speaker": "Inga",
            "dia_id": "D1:2",
            "text": "I finally bought a kayak, it is bright orange.",
        },
        {
            "speaker": "Bo",
            "dia_id": "D1:3",
            "text": "Look at what I baked yesterday!",
            "img_url": ["http://example.invalid/x.jpg"],
            "blip_caption": "a photo of a lemon tart on a blue plate",
        },
    ],
    "session_2_date_time": "7:05 am on 21 June, 2023",
    "session_2": [
        {"speaker": "Inga", "dia_id": "D2:1", "text": "I paddled my kayak across Lake Vorn."},
        {"speaker": "Bo", "dia_id": "D2:2", "text": "My sister Tove moved to Harrowgate."},
    ],
    "qa": [
        {
            "question": "What colour is Inga's kayak?",
            "answer": "orange",
            "evidence": ["D1:2"],
            "category": 4,
        },
        {
            "question": "What did Bo bake?",
            "answer": "a lemon tart",
            "evidence": ["D1:3 "],
            "category": 4,
        },
        {
            "question": "Where did Inga take the kayak she bought?",
            "answer": "Lake Vorn",
            "evidence": ["D1:2; D:2:1"],
            "category": 1,
        },
        {"question": "When did Inga buy a kayak?", "answer": 2023, "evidence": [], "category": 2},
        {
            "question": "What did Inga realise about her brother's car?",
            "evidence": ["D2:2"],
            "category": 5,
            "adversarial_answer": "it is red",
        },
    ],
}


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "conv-Tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_session_time_is_iso_utc():
    assert session_time("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00Z"
    assert session_time("12:48 am on 1 February, 2023") == "2023-02-01T00:48:00Z"
    with pytest.raises(DatasetError, match="session date"):
        session_time("8 May 2023")


def test_normalize_evidence_splits_and_repairs():
    assert normalize_evidence(["D8:6; D9:17", " D1:3 ", "D:11:26", "D", ""]) == [
        "D8:6",
        "D9:17",
        "D1:3",
        "D11:26",
    ]


def test_loader_turns_dates_captions_and_categories(tiny):
    conv = load_conversation(tiny)
    assert conv.name == "conv-tiny"  # a valid tenant name from the file name
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert [t.session for t in conv.turns] == [1, 1, 1, 2, 2]
    assert {t.time for t in conv.turns[:3]} == {"2023-05-08T13:56:00Z"}
    assert conv.turns[3].time == "2023-06-21T07:05:00Z"
    baked = conv.turns[2]
    assert baked.memory_text.startswith("Bo: Look at what I baked yesterday!")
    assert "a lemon tart on a blue plate" in baked.memory_text  # the photo caption appended
    assert conv.turns[1].memory_text == "Inga: I finally bought a kayak, it is bright orange."
    # category 5 kept apart; the question without evidence is left out of recall and counted
    assert [q.category for q in conv.questions] == [4, 4, 1]
    assert [q.category for q in conv.adversarial] == [5]
    assert conv.no_evidence == 1
    assert conv.questions[1].evidence == ("D1:3",)
    assert conv.questions[2].evidence == ("D1:2", "D2:1")
    assert turn_passage(conv.turns[3], conv.name).title == "2023-06-21"
    assert turn_passage(conv.turns[3], conv.name, date_title=False).title == ""


def test_loader_rejects_bad_files(tmp_path):
    with pytest.raises(DatasetError, match="not found"):
        load_conversation(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"session_1": [{"speaker": "A"}], "qa": []}))
    with pytest.raises(DatasetError, match="turn without"):
        load_conversation(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(DatasetError, match="'qa'"):
        load_conversation(bad)


def test_evidence_recall_by_hand():
    where = {"D1:1": "p1", "D1:2": "p2", "D2:1": "p3"}
    assert evidence_recall(["p2", "p9", "p3"], ["D1:2", "D2:1"], where, 1) == 0.5
    assert evidence_recall(["p2", "p9", "p3"], ["D1:2", "D2:1"], where, 3) == 1.0
    assert evidence_recall([], ["D1:1"], where, 5) == 0.0


def test_run_locomo_end_to_end(tiny, tmp_path, embedder):
    # a second conversation, in its own tenant, asks the same question of its one turn
    other = dict(TINY, qa=[dict(TINY["qa"][0], evidence=["D1:1"])])
    other["session_1"] = [
        {"speaker": "Ola", "dia_id": "D1:1", "text": "Inga's kayak is bright orange, she said."}
    ]
    other["session_2"] = []
    second = tmp_path / "conv-other.json"
    second.write_text(json.dumps(other))
    home = tmp_path / "home"
    report = run_locomo(
        LocomoSetup((tiny, second), home, modes=("dense", "hipporag"), ks=(1, 2, 5)),
        embedder=embedder,
    )
    assert report["questions"] == 4 and report["adversarial"] == 1 and report["no_evidence"] == 1
    assert [c["tenant"] for c in report["conversations"]] == ["conv-tiny", "conv-other"]
    for name in ("conv-tiny", "conv-other"):
        assert (Path(tenant_home(home, name)) / "snapshots").is_dir()
    assert report["passages"] == 6
    for mode in ("dense", "hipporag"):
        recall = report["results"][mode]
        assert set(recall) == {"recall@1", "recall@2", "recall@5"}
        assert recall["recall@1"] <= recall["recall@2"] <= recall["recall@5"]
        # every conversation is tiny: all its passages are in the top 5
        assert recall["recall@5"] == 1.0
        assert set(report["by_category"][mode]) == {"1 multi-hop", "4 single-hop"}
        assert set(report["abstention"][mode]) == {"adversarial_no_answer", "answerable_no_answer"}
        assert report["timings"][f"{mode}_ms_per_query"] > 0
    # the kayak colour is asked of each conversation: each finds its own turn first
    assert report["by_category"]["dense"]["4 single-hop"]["recall@1"] >= 0.5
    again = run_locomo(LocomoSetup((tiny,), home, modes=("dense",), ks=(1,)), embedder=embedder)
    assert again["results"]["dense"]["recall@1"] == pytest.approx(
        _dense_top1(tiny, home, embedder), abs=1e-9
    )


def _dense_top1(path: Path, home: Path, embedder) -> float:
    """Dense recall@1 computed here by hand from the turns' cosine to each question."""
    import numpy as np

    conv = load_conversation(path)
    passages = {t.dia_id: turn_passage(t, conv.name) for t in conv.turns}
    ids = list(dict.fromkeys(p.id for p in passages.values()))
    texts = {p.id: p.full_text for p in passages.values()}
    vec = embedder.embed([texts[i] for i in ids])  # (n_passages, dim)
    total = 0.0
    for q in conv.questions:
        best = ids[int(np.argmax(vec @ embedder.embed([q.text])[0]))]
        total += sum(passages[e].id == best for e in q.evidence) / len(q.evidence)
    return total / len(conv.questions)


def test_cli_eval_locomo(tiny, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(
        ["eval", "--locomo", str(tiny), "--home", str(tmp_path / "h"), "--modes", "dense",
         "--k", "1,5", "--json", str(out), "--locomo-via", "documents"]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "locomo" and set(report["results"]) == {"dense"}
    assert report["results"]["dense"]["recall@5"] == 1.0
    assert report["abstention"]["dense"] == {
        "adversarial_no_answer": 1.0,  # nobody in the tiny conversation speaks of a car
        "answerable_no_answer": 0.0,
    }
    strict = ["--min-relevance", "1", "--json", str(out)]
    base = ["eval", "--locomo", str(tiny), "--home", str(tmp_path / "h"), "--modes", "dense"]
    base += ["--locomo-via", "documents"]
    assert main(base + strict) == 0  # nothing reaches relevance 1: every question abstains
    report = json.loads(out.read_text())
    assert report["abstention"]["dense"]["answerable_no_answer"] == 1.0
    assert report["abstention"]["dense"]["adversarial_no_answer"] == 1.0
    assert report["results"]["dense"]["recall@10"] == 0.0


def test_cli_eval_offtopic_reports_abstention(toy_dataset, tmp_path, capsys):
    queries = tmp_path / "q.txt"
    queries.write_text("# two of each\nzxqv blorf\nqqq rrr sss\n" + "What does Ivo Lark paint?\n")
    out = tmp_path / "r.json"
    data = toy_dataset
    args = ["eval", "--questions", str(data.questions), "--corpus", str(data.corpus),
            "--openie", str(data.openie), "--home", str(tmp_path / "h"),
            "--modes", "dense,hipporag", "--offtopic", str(queries),
            "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    report = json.loads(out.read_text())
    for mode in ("dense", "hipporag"):
        assert report["offtopic"][mode]["queries"] == 3
        assert report["offtopic"][mode]["no_answer"] == pytest.approx(2 / 3)
    assert report["offtopic"]["file"] == str(queries)


def test_cli_eval_locomo_errors(tiny, tmp_path, capsys):
    assert main(["eval", "--locomo", str(tmp_path / "none.json"), "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qortex: error: LoCoMo file not found")
    assert main(["eval", "--locomo", str(tiny), "--corpus", "x.json"]) == 2
    assert "takes no --questions" in capsys.readouterr().err
    assert main(["eval", "--home", str(tmp_path)]) == 2
    assert "--locomo" in capsys.readouterr().err
