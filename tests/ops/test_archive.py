"""``qortex export`` / ``qortex import`` on real homes: the round trip answers every mode the
same, a second import or a merge adds no duplicate, and a bad file changes nothing.

The homes are built by the real ingest job (Dagster in-process) with the offline extractor and a
hashing embedder (the model is not the point here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import qortex_core
from qortex_cli.main import main
from qortex_cli.runs.local import run_ingest
from qortex_core.embed import make_embedder
from qortex_core.memory.records import MEMORIES
from qortex_core.query import modes
from qortex_core.storage.store import FACTORS, FEEDBACK_EVENTS, LanceStore

PEOPLE = ["Ada Quill", "Bram Orto", "Cyra Venn", "Dov Hale", "Esk Marrow", "Fen Ludo"]
THINGS = ["Zorblat Engine", "Quillon Dam", "Ventra Bridge", "Orion Pump", "Vega Valve"]
TOWNS = ["Fennick", "Lowmarsh", "Tarsby", "Oskvale", "Brindle", "Cobbeth", "Ruewick"]
SPEC = "hash:64"


def _sentence(n: int) -> tuple[str, str]:
    person, thing, town = PEOPLE[n % 6], THINGS[n % 5], TOWNS[n % 7]
    return (
        f"{thing} {n}",
        f"{person} repaired the {thing} number {n} near {town} in year {1900 + n}.",
    )


@pytest.fixture(scope="module")
def hash_env():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("QORTEX_EMBEDDER", SPEC)
        patch.setenv("QORTEX_EXTRACTOR", "offline")
        yield


def _open(home: Path):
    return qortex_core.open(home, embedder=make_embedder(SPEC))


def _build(root: Path) -> tuple[Path, list[str]]:
    """A home with 30 file passages and 24 memories (one revised, one forgotten) consolidated in
    one run, then feedback folded into factors.

    One run: a passage deleted from the BM25 table by a later run stays in LanceDB's BM25
    statistics, so the original's lexical scores would drift from a fresh build's (see the
    reliability notes), which is not what this test is about.
    """
    src = root / "src" / "notes"
    src.mkdir(parents=True)
    corpus = [{"title": t, "text": x} for t, x in map(_sentence, range(30))]
    (src / "repairs.json").write_text(json.dumps(corpus))
    home = root / "home"
    mem = _open(home)
    written = mem.remember_many([_sentence(n)[1] for n in range(30, 54)], domain="chat")
    mem.update(written[0].id, "Ada Quill rebuilt the Vega Valve near Tarsby in year 1990.")
    mem.forget(written[1].id)
    run_ingest(src.parent, home, progress=False)  # the files and the memories
    texts = [c["text"] for c in corpus] + [w.text for w in written]
    queries = [" ".join(x.split()[:6]) for x in texts]
    for q in queries[:8]:
        result = mem.search(q, top_k=3)
        judged = {"accepted": [result.passages[0].id], "rejected": [result.passages[-1].id]}
        mem.feedback(result.query_id, **judged)
    mem.retriever().update_factors()
    return home, queries[:50]


@pytest.fixture(scope="module")
def original(tmp_path_factory, hash_env) -> tuple[Path, list[str], Path]:
    root = tmp_path_factory.mktemp("archive")
    home, queries = _build(root)
    out = root / "home.jsonl"
    assert main(["export", "--home", str(home), str(out)]) == 0
    return home, queries, out


def _tops(home: Path, queries: list[str]) -> dict[str, list[list[str]]]:
    mem = _open(home)
    return {
        mode: [[h.id for h in mem.search(q, top_k=10, mode=mode).passages] for q in queries]
        for mode in modes.names()
    }


def _state(home: Path) -> dict[str, tuple[int, int]]:
    """(rows, version) of every table: what a refused import must leave as it was."""
    store = LanceStore.open(home)
    return {n: (store.count(n), int(store.open_latest(n).version)) for n in store.table_names()}


def test_round_trip_answers_every_mode_alike(original, tmp_path: Path, capsys) -> None:
    home, queries, out = original
    copy = tmp_path / "copy"
    assert main(["import", "--home", str(copy), str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["added"][MEMORIES] == LanceStore.open(home).count(MEMORIES)
    assert report["factors"] == "copied"
    run_ingest(None, copy, progress=False)
    before, after = _tops(home, queries), _tops(copy, queries)
    assert len(queries) == 50 and all(any(top) for top in before.values())
    assert after == before
    mem, back = _open(home), _open(copy)
    rid = mem.list(limit=100)[0].id
    assert [(r.revision, r.op, r.text) for r in back.history(rid)] == [
        (r.revision, r.op, r.text) for r in mem.history(rid)
    ]


def test_a_second_import_and_a_merge_add_no_duplicate(original, tmp_path: Path) -> None:
    home, _queries, out = original
    other = tmp_path / "other"
    own = _open(other).remember_many(
        ["Gil Tarn painted the Ruewick mill.", "Hal Ost fixed a gate."]
    )
    assert main(["import", "--home", str(other), str(out)]) == 0
    counts = _state(other)
    assert main(["import", "--home", str(other), str(out)]) == 0  # again: nothing new
    assert {n: c for n, (c, _v) in _state(other).items()} == {n: c for n, (c, _v) in counts.items()}
    store, source = LanceStore.open(other), LanceStore.open(home)
    rows = store.read(MEMORIES)
    assert rows.num_rows == source.count(MEMORIES) + len(own)
    keys = rows["key"].to_pylist()
    columns = (rows[c].to_pylist() for c in ("id", "revision", "op"))
    pairs = [(i, r) for i, r, op in zip(*columns) if op != "supersede"]  # links: by key
    assert len(set(keys)) == len(keys) and len(set(pairs)) == len(pairs)
    events = store.read(FEEDBACK_EVENTS)["event_id"].to_pylist()
    assert len(events) == len(set(events)) == source.count(FEEDBACK_EVENTS)
    assert store.count(FACTORS) == source.count(FACTORS)
    assert {r.id for r in _open(other).list(limit=100)} >= {r.id for r in own}


def test_a_revision_written_otherwise_here_is_kept_and_counted(
    original, tmp_path: Path, capsys
) -> None:
    home, _queries, out = original
    lines = out.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith('{"table": "memories"'))
    row = json.loads(lines[at])
    row["row"]["key"], row["row"]["text"] = "k_other", "Another text for the same revision."
    changed = tmp_path / "changed.jsonl"
    changed.write_text("\n".join(lines[:at] + [json.dumps(row)] + lines[at + 1 :]) + "\n")
    copy = tmp_path / "copy"
    assert main(["import", "--home", str(copy), str(out)]) == 0
    capsys.readouterr()
    assert main(["import", "--home", str(copy), str(changed), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["conflicts"] == 1 and report["added"][MEMORIES] == 0
    assert "Another text" not in json.dumps(
        LanceStore.open(copy).read(MEMORIES)["text"].to_pylist()
    )


def _edit(lines: list[str], case: str) -> list[str]:
    at = next(i for i, line in enumerate(lines) if line.startswith('{"table": "memories"'))
    row = json.loads(lines[at])
    if case == "cut short":
        return lines[:-1]
    if case == "not json":
        return lines[:at] + ['{"table": "memories", "row": '] + lines[at + 1 :]
    if case == "wrong type":
        row["row"]["revision"] = "2"
    elif case == "bad vector":
        row["row"]["vector"] = row["row"]["vector"][:-8]
    elif case == "unknown table":
        row["table"] = "chunks"
    elif case == "not an export":
        return ['{"hello": 1}'] + lines[1:]
    return lines[:at] + [json.dumps(row)] + lines[at + 1 :]


@pytest.mark.parametrize(
    "case", ["cut short", "not json", "wrong type", "bad vector", "unknown table", "not an export"]
)
def test_a_bad_file_is_one_line_and_changes_nothing(original, tmp_path: Path, capsys, case) -> None:
    _home, _queries, out = original
    target = tmp_path / "target"
    _open(target).remember("Ivo Lark paints harbour landscapes.")
    before = _state(target)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(_edit(out.read_text().splitlines(), case)) + "\n")
    capsys.readouterr()
    assert main(["import", "--home", str(target), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("qortex: error: ") and "\n" not in err and "nothing was imported" in err
    assert _state(target) == before


def test_export_refuses_a_missing_home_and_writes_nothing(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["export", "--home", str(tmp_path / "nowhere"), str(out)]) == 2
    assert "not found" in capsys.readouterr().err and not out.exists()
    assert not (tmp_path / "out.jsonl.partial").exists()


def test_a_gzipped_export_reads_back_the_same_rows(original, tmp_path: Path) -> None:
    from qortex_core.ops.archive import export_home
    from qortex_core.ops.archive_import import read_export

    home, _queries, out = original
    packed = tmp_path / "home.jsonl.gz"
    report = export_home(home, packed)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzip
    assert read_export(packed).rows == read_export(out).rows
    assert report.rows[MEMORIES] == LanceStore.open(home).count(MEMORIES)
