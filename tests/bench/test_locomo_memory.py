"""LoCoMo through the agent write path: one memory per turn, consolidated into the graph."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qortex_bench.locomo import LocomoSetup, load_conversation, run_locomo
from qortex_bench.locomo_memory import turn_times
from qortex_cli.main import main
from qortex_core.agent.api import open_memory
from qortex_core.storage import snapshot as snap
from qortex_core.storage.tenants import tenant_home

TURNS = [
    ("Bo", "D1:1", "Hi Inga! How was your week?"),
    ("Inga", "D1:2", "I finally bought a kayak, it is bright orange."),
    ("Bo", "D1:3", "Hi Inga! How was your week?"),  # the same words again: merged
    ("Inga", "D1:4", "My cousin Tove keeps bees near Harrowgate."),
]
CONV = {
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [{"speaker": s, "dia_id": d, "text": t} for s, d, t in TURNS],
    "session_2_date_time": "7:05 am on 21 June, 2023",
    "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I paddled across Lake Vorn."}],
    "qa": [
        {"question": "What colour is Inga's kayak?", "evidence": ["D1:2"], "category": 4},
        {"question": "Who keeps bees?", "evidence": ["D1:4"], "category": 4},
        {"question": "What did Bo say first?", "evidence": ["D1:3"], "category": 4},
        {"question": "What colour is Bo's kayak?", "evidence": ["D1:2"], "category": 5},
    ],
}


@pytest.fixture
def conv_file(tmp_path: Path) -> Path:
    path = tmp_path / "conv-mem.json"
    path.write_text(json.dumps(CONV))
    return path


def test_turn_times_keep_the_date_and_the_order():
    conv_times = turn_times(load_conversation_from(CONV).turns)
    assert conv_times[:4] == [f"2023-05-08T13:56:0{n}Z" for n in range(4)]
    assert conv_times[4] == "2023-06-21T07:05:00Z"  # a new session starts at its own time


def load_conversation_from(data: dict, tmp=Path("/tmp")):
    path = tmp / f"qortex-test-{id(data)}.json"
    path.write_text(json.dumps(data))
    try:
        return load_conversation(path)
    finally:
        path.unlink()


def test_memory_path_maps_turns_to_records_and_passages(conv_file, tmp_path, embedder):
    home = tmp_path / "home"
    setup = LocomoSetup((conv_file,), home, modes=("dense", "auto"), ks=(1, 5), via="memory")
    report = run_locomo(setup, embedder=embedder)
    (conv,) = report["conversations"]
    assert conv["via"] == "memory" and conv["turns"] == 5
    assert conv["memories"] == 4 and conv["merged"] == 1  # D1:1 and D1:3 are one memory now
    mem = open_memory(home, tenant="conv-mem", embedder=embedder)
    records = mem.list(limit=100)
    assert {r.metadata["dia_id"] for r in records} <= {d for _, d, _ in TURNS} | {"D2:1"}
    kayak = next(r for r in records if "kayak" in r.text)
    assert kayak.metadata == {"dia_id": "D1:2", "conversation": "conv-mem"}
    assert kayak.time == "2023-05-08T13:56:01Z" and kayak.text.startswith("Inga: ")
    loaded = snap.load(tenant_home(home, "conv-mem"))
    docs = {p["doc_id"] for p in loaded.tables["passages"].to_pylist()}
    assert docs == {f"memory:{r.id}" for r in records}
    # the three memories of session 1 are one sitting; the session-2 turn came weeks later
    assert loaded.manifest["sequence"] == {"edges": 3, "passages": 3}
    for mode in ("dense", "auto"):  # 4 memories: every evidence turn is in the top 5
        assert report["results"][mode]["recall@5"] == 1.0
    again = run_locomo(setup, embedder=embedder)  # nothing written twice
    assert len(mem.list(limit=100)) == 4 and again["results"] == report["results"]


def test_cli_memory_path_refuses_a_home_with_files(conv_file, tmp_path, capsys):
    home = tmp_path / "h"
    args = ["eval", "--locomo", str(conv_file), "--home", str(home), "--modes", "dense"]
    as_documents = ["--locomo-via", "documents", "--k", "1", "--json", str(tmp_path / "r.json")]
    assert main(args + as_documents) == 0
    capsys.readouterr()
    assert main(args) == 2  # the default path, memory, needs a home of its own
    err = capsys.readouterr().err
    assert "qortex: error: " in err and "another --home" in err and "Traceback" not in err
