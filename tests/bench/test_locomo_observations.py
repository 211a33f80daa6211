"""LoCoMo observations: loaded as per-speaker statements, replayed as recorded facts, and what
the attribution check makes of them (a question about the wrong speaker is withheld)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qortex_bench.locomo import LocomoSetup, load_conversation, run_locomo
from qortex_bench.locomo_facts import extractor_for, recorded_facts
from qortex_core.ingest.extract import OfflineExtractor, WithRecordedFacts
from qortex_core.query.retriever import Retriever
from qortex_core.storage.model import Passage

CHAT = {
    "speaker_a": "Bo",
    "speaker_b": "Inga",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Bo", "dia_id": "D1:1", "text": "Hi Inga! How was your week?"},
        {"speaker": "Inga", "dia_id": "D1:2", "text": "I finally bought a kayak, bright orange."},
        {"speaker": "Bo", "dia_id": "D1:3", "text": "Nice! I baked a lemon tart yesterday."},
        {"speaker": "Inga", "dia_id": "D1:4", "text": "Save me a slice of that tart!"},
    ],
    "session_1_observation": {
        "Inga": [
            ["Inga bought a bright orange kayak.", "D1:2"],
            ["Inga cites a turn the chat does not have.", "D7:7"],
            "not a [statement, evidence] pair",
        ],
        "Bo": [["Bo baked a lemon tart.", ["D1:3"]]],
    },
    "session_2_date_time": "7:05 am on 21 June, 2023",
    "session_2": [
        {"speaker": "Inga", "dia_id": "D2:1", "text": "I paddled across Lake Vorn at dawn."},
        {"speaker": "Bo", "dia_id": "D2:2", "text": "My sister Tove moved to Harrowgate."},
    ],
    "session_2_observation": {
        "Inga": [["Inga paddled her kayak across Lake Vorn.", "D:2:1"]],
        "Bo": [["Bo's sister Tove moved to Harrowgate.", "D2:2"]],
    },
    "qa": [
        {"question": "What colour is Inga's kayak?", "answer": "orange", "evidence": ["D1:2"],
         "category": 4},
        {"question": "What did Bo bake?", "answer": "a lemon tart", "evidence": ["D1:3"],
         "category": 4},
        {"question": "What colour is Bo's kayak?", "evidence": ["D1:2"], "category": 5,
         "adversarial_answer": "orange"},
    ],
}  # fmt: skip


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    path = tmp_path / "conv-chat.json"
    path.write_text(json.dumps(CHAT))
    return path


def test_observations_loaded_with_their_turns(chat):
    conv = load_conversation(chat)
    got = [(o.speaker, o.text, o.evidence) for o in conv.observations]
    assert got == [
        ("Inga", "Inga bought a bright orange kayak.", ("D1:2",)),
        ("Bo", "Bo baked a lemon tart.", ("D1:3",)),
        ("Inga", "Inga paddled her kayak across Lake Vorn.", ("D2:1",)),  # D:2:1 repaired
        ("Bo", "Bo's sister Tove moved to Harrowgate.", ("D2:2",)),
    ]  # the statement citing no turn of the chat and the malformed entry are left out
    facts = recorded_facts(conv)
    assert facts["Inga: I finally bought a kayak, bright orange."] == [
        ("Inga", "observed", "Inga bought a bright orange kayak.")
    ]
    assert len(facts) == 4  # one turn each; turns no observation cites get none
    assert isinstance(extractor_for(conv, True), WithRecordedFacts)
    assert isinstance(extractor_for(conv, False), OfflineExtractor)


def test_recorded_facts_are_added_to_the_offline_extraction():
    turn = Passage("Inga: I paddled across Lake Vorn at dawn.", "2023-06-21", "c#D2:1")
    base = OfflineExtractor()
    plus = WithRecordedFacts(base, {turn.text: [("Inga", "observed", "Inga paddled far.")]}, "obs")
    alone, both = base.extract([turn])[0], plus.extract([turn])[0]
    assert set(alone.facts) < set(both.facts)  # the offline facts are kept
    assert ("Inga", "observed", "Inga paddled far.") in {
        (f.subject, f.predicate, f.object) for f in both.facts
    }
    assert {"Inga", "Inga paddled far."} <= {c.name for c in both.concepts}
    assert plus.cache_key != base.cache_key  # cached extractions of one do not serve the other
    other = Passage("Bo: hello", "", "c#D1:1")
    assert plus.extract([other])[0] == base.extract([other])[0]  # nothing recorded: unchanged


def test_question_about_the_wrong_speaker_is_withheld(chat, tmp_path, embedder):
    home = tmp_path / "home"
    setup = LocomoSetup((chat,), home, modes=("dense", "auto"), ks=(1, 5), via="documents")
    report = run_locomo(setup, embedder=embedder)
    for mode in ("dense", "auto"):
        assert report["abstention"][mode] == {
            "adversarial_no_answer": 1.0,
            "answerable_no_answer": 0.0,
        }
        assert report["results"][mode]["recall@5"] == 1.0
    assert report["conversations"][0]["observations"] == 4
    retriever = Retriever.open(home, embedder=embedder, tenant="conv-chat")
    wrong = retriever.query("What colour is Bo's kayak?")
    assert wrong.no_answer and wrong.passages == []
    assert "said of Inga, not Bo" in (wrong.fallback or "")
    assert retriever.query("What colour is Bo's kayak?", min_relevance=0).passages  # 0: never
    right = retriever.query("What colour is Inga's kayak?")
    assert not right.no_answer and "kayak" in right.passages[0].text


def test_without_observations_nothing_says_who_did_what(chat, tmp_path, embedder):
    setup = LocomoSetup(
        (chat,), tmp_path / "home", modes=("auto",), ks=(1,), via="documents", observations=False
    )
    report = run_locomo(setup, embedder=embedder)
    assert report["abstention"]["auto"]["adversarial_no_answer"] == 0.0
    assert report["conversations"][0]["observations"] == 0


def test_cli_eval_replays_observations_unless_offline(chat, tmp_path):
    from qortex_cli.main import main

    def run(*extra: str) -> dict:
        out = tmp_path / f"report{len(extra)}.json"
        home = tmp_path / f"h{len(extra)}"
        argv = ["eval", "--locomo", str(chat), "--home", str(home), "--modes", "auto", "--k", "1",
                "--locomo-via", "documents", "--json", str(out), *extra]  # fmt: skip
        assert main(argv) == 0
        return json.loads(out.read_text())

    default, offline = run(), run("--extractor", "offline")
    assert default["observations"] is True and default["conversations"][0]["observations"] == 4
    assert default["abstention"]["auto"]["adversarial_no_answer"] == 1.0
    assert offline["observations"] is False and offline["conversations"][0]["observations"] == 0


def test_observations_of_a_released_locomo10_row(tmp_path):
    # locomo10.json rows keep the turns under "conversation" and observations under "observation"
    seen = {k: v for k, v in CHAT.items() if k.endswith("_observation")}
    turns = {k: v for k, v in CHAT.items() if k != "qa" and k not in seen}
    row = {"sample_id": "x", "conversation": turns, "observation": seen, "qa": CHAT["qa"]}
    path = tmp_path / "row.json"
    path.write_text(json.dumps(row))
    conv = load_conversation(path)
    assert len(conv.turns) == 6 and len(conv.observations) == 4
