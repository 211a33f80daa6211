"""``qortex ablation --locomo``: retrieval and graph variants over conversation tenants."""

from __future__ import annotations

import json
from pathlib import Path

from qortex_bench.locomo_ablation import locomo_variants
from qortex_cli.main import main
from qortex_core.storage import snapshot as snap
from qortex_core.storage.tenants import tenant_home

CONV = {
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Bo", "dia_id": "D1:1", "text": "Did you get the boat in the end?"},
        {"speaker": "Inga", "dia_id": "D1:2", "text": "Yes, a kayak, bright orange."},
        {"speaker": "Bo", "dia_id": "D1:3", "text": "My sister Tove moved to Harrowgate."},
    ],
    "qa": [
        {"question": "What colour is Inga's kayak?", "evidence": ["D1:2"], "category": 4},
        {"question": "Where did Tove move?", "evidence": ["D1:3"], "category": 4},
        {"question": "Where did Inga's sister move?", "evidence": ["D1:3"], "category": 5},
    ],
}


def test_cli_ablation_locomo_rows_and_the_default_graph_back(tmp_path: Path, capsys):
    path = tmp_path / "conv-abl.json"
    path.write_text(json.dumps(CONV))
    home = tmp_path / "home"
    evaluate = ["eval", "--locomo", str(path), "--home", str(home), "--modes", "dense"]
    assert main(evaluate + ["--locomo-via", "documents"]) == 0
    out = tmp_path / "rows.json"
    assert main(["ablation", "--locomo", str(path), "--home", str(home), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    names = [r["variant"] for r in rows]
    assert names == [v.name + g.name for g in locomo_variants() for v in g.rows]
    assert all(0.0 <= r[f"recall@{k}"] <= 1.0 for r in rows for k in (1, 2, 5, 10))
    assert all(r["recall@5"] == 1.0 for r in rows)  # three turns: all in the top 5
    assert "| textwalk mode, no sequence edges |" in capsys.readouterr().out
    latest = snap.load(tenant_home(home, "conv-abl"))
    assert latest.manifest["params"]["graph"]["sequence"]["weight"] == 2.0  # default graph last
    assert latest.manifest["sequence"] == {"edges": 3, "passages": 3}


def test_cli_ablation_needs_one_question_source(tmp_path: Path, capsys):
    assert main(["ablation", "--home", str(tmp_path)]) == 2
    assert "either --questions FILE or --locomo" in capsys.readouterr().err
