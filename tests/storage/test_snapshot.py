"""Snapshots: round trip, versions, corruption detection, pinning and atomic publication."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from qortex_core.errors import HomeError, SnapshotError
from qortex_core.storage import checksums
from qortex_core.storage import snapshot as snap
from qortex_core.storage.snapshot_schema import ARRAY_NAMES, COUNT_NAMES

REPO = Path(__file__).resolve().parents[2]


# the schema's other arrays and counts (qortex_core/storage/snapshot_schema.py): one phrase,
# one passage, no fact, so the counts agree with the rows (snapshot_shapes checks they do)
ONE_PHRASE = ("phrase_vectors", "phrase_passage_count", "phrase_text_frequency")
EMPTY_ARRAYS = {
    name: np.zeros(1 if name in ONE_PHRASE else 0, np.float32)
    for name in ARRAY_NAMES
    if name not in ("adj_indptr", "adj_indices", "adj_data", "passage_vectors")
}
EMPTY_ARRAYS["fact_passage_indptr"] = np.zeros(1, np.int64)
COUNTS = dict.fromkeys(COUNT_NAMES, 0)


def make_snapshot(marker: int, size: int = 1000) -> snap.Snapshot:
    """A small snapshot whose every part carries ``marker`` so a reader can check it is whole."""
    indptr = np.array([0, 1, 2], np.int64)
    arrays = {
        "adj_indptr": indptr,
        "adj_indices": np.array([1, 0], np.int32),
        "adj_data": np.array([2.5, 2.5], np.float32),
        "marker": np.full(size, marker, np.int64),
        "passage_vectors": np.arange(4, dtype=np.float32).reshape(1, 4) + marker,
        **EMPTY_ARRAYS,
    }
    tables = {
        "nodes": pa.table(
            {
                "id": [f"n{marker}_a", f"n{marker}_b"],
                "kind": ["phrase", "passage"],
                "marker": [marker, marker],
            }
        ),
        "passages": pa.table({"id": ["p1"], "text": [f"text {marker}"]}),
        "facts": pa.table({"id": pa.array([], pa.string())}),
        "rules": pa.table({"id": pa.array([], pa.string())}),
    }
    manifest = {
        "counts": {**COUNTS, "phrases": 1, "passages": 1, "nodes": 2, "marker": marker},
        "embedding_model": "all-MiniLM-L6-v2",
        "table_versions": {"passages": 3 + marker, "facts": 7},
        "params": {"graph": {"fact_weight": 1.0}, "marker": marker},
    }
    return snap.Snapshot(arrays=arrays, tables=tables, manifest=manifest)


def check_whole(loaded: snap.Snapshot) -> int:
    """The marker of a loaded snapshot, after checking every part agrees on it."""
    marker = loaded.manifest["params"]["marker"]
    assert loaded.manifest["counts"]["marker"] == marker
    assert (np.asarray(loaded.arrays["marker"]) == marker).all()
    assert loaded.tables["nodes"]["marker"].to_pylist() == [marker, marker]
    assert loaded.tables["passages"]["text"].to_pylist() == [f"text {marker}"]
    return marker


def test_round_trip(tmp_path):
    original = make_snapshot(4)
    path = snap.publish(tmp_path, original)
    loaded = snap.load(tmp_path)
    assert loaded.path == path
    assert set(loaded.arrays) == set(original.arrays)
    for name, array in original.arrays.items():
        np.testing.assert_array_equal(loaded.arrays[name], array)
        assert loaded.arrays[name].dtype == array.dtype
    for name, table in original.tables.items():
        assert loaded.tables[name].equals(table)
    m = loaded.manifest
    assert m["counts"] == original.manifest["counts"]
    assert m["params"] == original.manifest["params"]
    assert m["embedding_model"] == "all-MiniLM-L6-v2"
    assert m["table_versions"] == {"passages": 7, "facts": 7}
    assert m["version"] == 1 and loaded.version == 1
    assert m["name"] == path.name
    assert set(m["files"]) == {f"{n}.npy" for n in original.arrays} | {
        f"{n}.arrow" for n in original.tables
    }
    assert all(re.fullmatch(r"xxh3-128:[0-9a-f]{32}", digest) for digest in m["files"].values())
    assert loaded.n_phrases == 1
    assert loaded.adjacency.toarray().tolist() == [[0.0, 2.5], [2.5, 0.0]]


def test_arrays_are_memory_mapped_read_only(tmp_path):
    snap.publish(tmp_path, make_snapshot(1))
    loaded = snap.load(tmp_path)
    marker = loaded.arrays["marker"]
    assert isinstance(marker, np.memmap)
    with pytest.raises(ValueError):
        marker[0] = 99


def test_publish_does_not_change_the_caller_snapshot(tmp_path):
    original = make_snapshot(2)
    before = json.dumps(original.manifest, sort_keys=True)
    snap.publish(tmp_path, original)
    assert json.dumps(original.manifest, sort_keys=True) == before


def test_versions_increase_and_latest_moves(tmp_path):
    names = [snap.publish(tmp_path, make_snapshot(k)).name for k in range(3)]
    assert snap.list_versions(tmp_path) == names
    assert [int(n[1:7]) for n in names] == [1, 2, 3]
    assert snap.latest_name(tmp_path) == names[-1]
    assert check_whole(snap.load(tmp_path)) == 2
    assert not [
        p for p in snap.snapshots_dir(tmp_path).iterdir() if p.name.startswith(".")
    ]  # no temp leftovers


def test_pin_a_version(tmp_path):
    names = [snap.publish(tmp_path, make_snapshot(10 + k)).name for k in range(3)]
    assert check_whole(snap.load(tmp_path, "1")) == 10
    assert check_whole(snap.load(tmp_path, 2)) == 11
    assert check_whole(snap.load(tmp_path, names[0])) == 10
    assert snap.load(tmp_path, "000002").version == 2
    with pytest.raises(SnapshotError, match="no snapshot version 9"):
        snap.load(tmp_path, "9")
    with pytest.raises(SnapshotError, match="not a snapshot name"):
        snap.load(tmp_path, "../../etc")
    with pytest.raises(SnapshotError, match="not found"):
        snap.load(tmp_path, "v000002-00000000")


def test_no_snapshot_yet(tmp_path):
    with pytest.raises(SnapshotError, match="no snapshot published"):
        snap.load(tmp_path)
    with pytest.raises(SnapshotError, match="no snapshot published"):
        snap.load(tmp_path / "missing-home")
    assert snap.list_versions(tmp_path / "missing-home") == []


def flip_bytes(path: Path, at: int = -8) -> None:
    data = bytearray(path.read_bytes())
    for i in range(at, at + 4):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("fname", ["marker.npy", "adj_data.npy", "nodes.arrow"])
def test_flipped_bytes_fail_the_checksum(tmp_path, fname):
    path = snap.publish(tmp_path, make_snapshot(1))
    flip_bytes(path / fname)
    with pytest.raises(SnapshotError, match=f"checksum mismatch in {fname}"):
        snap.load(tmp_path)


@pytest.mark.parametrize("fname", ["marker.npy", "passages.arrow"])
def test_truncated_file_is_a_snapshot_error(tmp_path, fname):
    path = snap.publish(tmp_path, make_snapshot(1))
    target = path / fname
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    with pytest.raises(SnapshotError, match=f"checksum mismatch in {fname}"):
        snap.load(tmp_path)
    with pytest.raises(SnapshotError, match=f"cannot read {fname}"):
        snap.load(tmp_path, verify=False)  # without checksums the reader still refuses it


def test_missing_file_is_a_snapshot_error(tmp_path):
    path = snap.publish(tmp_path, make_snapshot(1))
    (path / "adj_indices.npy").unlink()
    with pytest.raises(SnapshotError, match="missing adj_indices.npy"):
        snap.load(tmp_path)


@pytest.mark.parametrize(
    "body", ["{not json", "[1, 2]", '{"files": ["marker.npy"]}', '{"files": {"../x.npy": "0"}}', ""]
)
def test_bad_manifest_is_a_snapshot_error(tmp_path, body):
    path = snap.publish(tmp_path, make_snapshot(1))
    (path / "manifest.json").write_text(body)
    with pytest.raises(SnapshotError, match="manifest"):
        snap.load(tmp_path)


def test_unknown_format_is_a_snapshot_error(tmp_path):
    path = snap.publish(tmp_path, make_snapshot(1))
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps(dict(manifest, format=snap.FORMAT + 1)))
    with pytest.raises(SnapshotError, match="format"):
        snap.load(tmp_path)


@pytest.mark.parametrize("pointer", ["garbage\n", "", "v000009-deadbeef\n"])
def test_bad_pointer_is_a_snapshot_error(tmp_path, pointer):
    snap.publish(tmp_path, make_snapshot(1))
    (snap.snapshots_dir(tmp_path) / snap.POINTER).write_text(pointer)
    with pytest.raises(SnapshotError):
        snap.load(tmp_path)


def test_home_that_is_a_file(tmp_path):
    home = tmp_path / "home"
    home.write_text("not a directory")
    for where in (home, home / "sub"):
        with pytest.raises(HomeError, match="not a directory"):
            snap.load(where)
    with pytest.raises(HomeError, match="cannot write snapshots under data home"):
        snap.publish(home, make_snapshot(1))
    assert home.read_text() == "not a directory"


def test_failed_publish_keeps_the_latest(tmp_path):
    first = snap.publish(tmp_path, make_snapshot(1))
    bad = make_snapshot(2)
    bad.tables["nodes"] = {"not": "a table"}  # written after the arrays: fails half-way through
    with pytest.raises(Exception):
        snap.publish(tmp_path, bad)
    assert snap.latest_name(tmp_path) == first.name
    assert snap.list_versions(tmp_path) == [first.name]
    assert check_whole(snap.load(tmp_path)) == 1
    assert not [p for p in snap.snapshots_dir(tmp_path).iterdir() if p.name.startswith(".tmp")]


PUBLISHER = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_snapshot import make_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.snapshot_schema import ARRAY_NAMES, COUNT_NAMES
home = Path(sys.argv[1])
for marker in range(2, 2 + int(sys.argv[2])):
    snap.publish(home, make_snapshot(marker, size=int(sys.argv[3])))
"""


def test_reader_sees_old_or_new_never_partial(tmp_path):
    """A reader loading the latest snapshot while another process publishes sees whole snapshots only."""
    size, count = 400_000, 6  # 3.2 MB per array: publishing takes long enough to overlap many reads
    snap.publish(tmp_path, make_snapshot(1, size=size))
    script = PUBLISHER.format(tests=str(Path(__file__).parent))
    writer = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path), str(count), str(size)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[int] = []
    try:
        while writer.poll() is None:
            seen.append(check_whole(snap.load(tmp_path)))
            time.sleep(0.002)
    finally:
        _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    seen.append(check_whole(snap.load(tmp_path)))
    assert seen == sorted(seen), "the latest snapshot never moves backwards"
    assert seen[-1] == count + 1
    assert len(seen) > 1
    print(f"reads: {len(seen)}, markers seen: {sorted(set(seen))}")
    assert snap.list_versions(tmp_path)[-1].startswith(f"v{count + 1:06d}-")


def _rewrite_manifest(path: Path, change) -> None:
    """Edit a published manifest in place (valid JSON, checksums of the files untouched)."""
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda m: m["files"].pop("fact_vectors.npy"), "no array fact_vectors"),
        (lambda m: m["files"].pop("rules.arrow"), "no table rules"),
        (lambda m: m.pop("counts"), "no 'counts'"),
        (lambda m: m["counts"].pop("edges"), "no count edges"),
        (lambda m: m["counts"].update(nodes="2"), "no count nodes"),
        (lambda m: m.pop("embedding_model"), "no 'embedding_model'"),
    ],
)
def test_incomplete_manifest_is_refused_and_the_previous_snapshot_serves(tmp_path, change, named):
    snap.publish(tmp_path, make_snapshot(1))
    latest = snap.publish(tmp_path, make_snapshot(2))
    _rewrite_manifest(latest, change)
    with pytest.raises(SnapshotError, match=f"incomplete manifest: .*{named}"):
        snap.load(tmp_path)
    loaded, problems = snap.load_latest_good(tmp_path)
    assert check_whole(loaded) == 1
    assert len(problems) == 1 and latest.name in problems[0] and named in problems[0]


def test_typed_arrays_name_what_an_in_memory_snapshot_lacks(tmp_path):
    from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotTables

    snap.publish(tmp_path, make_snapshot(3))
    loaded = snap.load(tmp_path)
    assert SnapshotArrays.of(loaded).adj_data.dtype == np.float32
    assert SnapshotTables.of(loaded).passages.num_rows == 1
    partial = snap.Snapshot(
        arrays={k: v for k, v in loaded.arrays.items() if k != "synonym_pairs"},
        tables=loaded.tables,
        manifest=loaded.manifest,
    )
    with pytest.raises(SnapshotError, match="incomplete: no array synonym_pairs"):
        SnapshotArrays.of(partial)


def test_threads_loading_snapshots_read_npy_headers_one_at_a_time(tmp_path, monkeypatch):
    """np.load parses each header with ast.literal_eval, which CPython 3.11 before 3.11.8 can
    get wrong in two threads at once (python/cpython#106905): loads serialise their headers."""
    import threading

    snap.publish(tmp_path, make_snapshot(1))
    inside, most, guard = [0], [0], threading.Lock()
    load = np.load

    def watched(*args, **kwargs):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.002)  # long enough for another thread to arrive
        try:
            return load(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(np, "load", watched)
    loaded: list[int] = []
    threads = [
        threading.Thread(target=lambda: loaded.append(len(snap.load(tmp_path).arrays)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(loaded) == 4 and loaded[0] > 1 and len(set(loaded)) == 1
    assert most[0] == 1


def test_checksums_are_computed_side_by_side_and_kept_in_file_order(tmp_path, monkeypatch):
    path = snap.publish(tmp_path, make_snapshot(1))
    files = sorted(path.glob("*.npy")) + [path / "absent.npy"]
    threads = set()
    serial = checksums.file_digest

    def recorded(p, like=None):
        threads.add(threading.current_thread().name)
        return serial(p, like)

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(checksums, "file_digest", recorded)
    got = checksums.digests_of(files)
    assert got == [serial(f) for f in files[:-1]] + [None]
    assert all(name.startswith("qortex-verify") for name in threads) and len(files) > 2
