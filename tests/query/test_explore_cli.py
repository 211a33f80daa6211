"""``qortex graph ...`` on the toy graph: JSON and text answers, GraphML/JSON export, a picture,
and one-line usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest
import scipy.sparse as sp

from qortex_cli.main import main
from qortex_core.storage import snapshot as snap


@pytest.fixture
def home(toy_home: Path, embedder, monkeypatch) -> Path:
    """The toy home; the CLI's memory gets the session's loaded model (no second load)."""
    monkeypatch.setattr("qortex_core.embed.make_embedder", lambda spec=None: embedder)
    return toy_home


def _json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_neighbors_path_and_entity_answer_in_json_and_text(home: Path, capsys) -> None:
    found = _json(capsys, "graph", "neighbors", "Lune", "--home", str(home))
    assert found["resolved"]["name"] == "Lune" and found["resolved"]["how"] == "exact"
    assert {"Dravia", "Tessa Brin", "Miravel Hall"} <= {n["name"] for n in found["neighbors"]}
    path = _json(capsys, "graph", "path", "Orlan Vesk", "Velmora", "--home", str(home))
    assert path["found"] and [s["name"] for s in path["steps"]] == [
        "Orlan Vesk", "Ostrania", "Velmora",
    ]  # fmt: skip
    info = _json(capsys, "graph", "entity", "Ostrania", "--home", str(home))
    assert {f["predicate"] for f in info["facts"]} == {"born in", "governed from"}
    assert main(["graph", "path", "Orlan Vesk", "Velmora", "--home", str(home)]) == 0
    text = capsys.readouterr().out
    assert "--born in--> Ostrania" in text and "--governed from--> Velmora" in text
    assert main(["graph", "neighbors", "Orlan Vesc", "--home", str(home)]) == 0
    assert "nearest concept to 'Orlan Vesc'" in capsys.readouterr().out


def test_export_writes_graphml_and_json_of_the_whole_graph(home: Path, tmp_path: Path, capsys):
    out = tmp_path / "g.graphml"
    assert (
        main(["graph", "export", "--format", "graphml", "--out", str(out), "--home", str(home)])
        == 0
    )
    graph = nx.read_graphml(out)
    loaded = snap.load(home, snap.latest_name(home))
    assert graph.number_of_nodes() == loaded.adjacency.shape[0]
    assert graph.number_of_edges() == sp.triu(loaded.adjacency, k=1).nnz  # each edge once
    kinds = nx.get_edge_attributes(graph, "relation")
    ids = {d["name"]: n for n, d in graph.nodes(data=True) if d["kind"] == "concept"}
    assert kinds[(ids["Ostrania"], ids["Velmora"])] in ("governed from",)
    capsys.readouterr()
    assert main(["graph", "export", "--format", "json", "--home", str(home)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert len(document["nodes"]) == graph.number_of_nodes()
    assert len(document["edges"]) == graph.number_of_edges()


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_show_draws_a_neighbourhood(home: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"lune{suffix}"
    assert (
        main(["graph", "show", "Lune", "--depth", "3", "--out", str(out), "--home", str(home)]) == 0
    )
    head = out.read_bytes()[:200]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in out.read_bytes()
    assert not list(tmp_path.glob("*.partial*"))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["graph", "neighbors", "Lune", "--depth", "9"], "depth must be"),
        (["graph", "path", "Lune", "Dravia", "--max-len", "0"], "max_len must be"),
        (["graph", "show", "Lune", "--out", "x.gif"], ".png or .svg"),
    ],
)
def test_usage_errors_are_one_line(home: Path, capsys, argv: list[str], needle: str) -> None:
    capsys.readouterr()
    assert main(argv + ["--home", str(home)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("qortex: error: ") and needle in err and "\n" not in err
