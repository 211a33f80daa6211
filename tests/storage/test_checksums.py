"""Files hashed as they are written: the digest is the file's, and a stale one is not given back."""

from __future__ import annotations

import hashlib
import json
import os
import re

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from qortex_core.errors import SnapshotError
from qortex_core.ingest import snapshot_vectors as vectors
from qortex_core.storage import snapshot as snap
from qortex_core.storage.checksums import (
    ALGORITHM,
    HashingWriter,
    WrittenDigests,
    digests_of,
    file_digest,
)
from qortex_core.storage.snapshot_files import _save_npy, write_arrow
from qortex_core.storage.snapshot_stamp import STAMP
from tests.storage.test_snapshot import check_whole, flip_bytes, make_snapshot


def test_hashing_writer_digest_is_the_written_files(tmp_path):
    rng = np.random.default_rng(0)
    array = rng.standard_normal((5_000, 24)).astype(np.float32)  # several of numpy's pieces
    table = pa.table({"id": [f"p{i}" for i in range(3_000)], "n": np.arange(3_000)})
    writes = {
        "a.npy": lambda sink: _save_npy(array, sink),
        "t.arrow": lambda sink: write_arrow(table, sink),
        "raw.bin": lambda sink: [sink.write(array[s : s + 700].data) for s in range(0, 5_000, 700)],
    }
    for name, write in writes.items():
        with HashingWriter(tmp_path / name) as sink:
            write(sink)
            digest = sink.digest()
        assert digest == file_digest(tmp_path / name), name
    assert np.array_equal(np.load(tmp_path / "a.npy"), array)
    assert pa.ipc.open_file(str(tmp_path / "t.arrow")).read_all().equals(table)


def test_written_digest_is_forgotten_once_taken_and_refused_when_the_file_changed(tmp_path):
    known = WrittenDigests()
    path = tmp_path / "v.bin"
    path.write_bytes(b"x" * 100)
    known.record(path, file_digest(path))
    assert known.take(path) == file_digest(path)
    assert known.take(path) is None  # taken once
    known.record(path, file_digest(path))
    with open(path, "ab") as fh:  # written again after it was hashed
        fh.write(b"y")
    os.utime(path, ns=(1, 1))
    assert known.take(path) is None


def test_staged_vector_file_digest_matches_its_bytes(tmp_path):
    source = tmp_path / "stored.npy"
    rows = np.arange(40 * 8, dtype=np.float32).reshape(40, 8)
    np.save(source, rows)
    order = np.random.default_rng(1).permutation(40)
    final = tmp_path / "final.npy"
    vectors.write_permuted(source, order, final)
    assert np.array_equal(np.load(final), rows[order])
    assert vectors.WRITTEN.take(final) == file_digest(final)


def test_new_checksums_are_xxh3_128_and_a_bare_64_digit_one_is_checked_as_sha256(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"qortex" * 1000)
    new = file_digest(path)
    assert new == f"{ALGORITHM}:{xxhash.xxh3_128(path.read_bytes()).hexdigest()}"
    assert re.fullmatch(r"xxh3-128:[0-9a-f]{32}", new)
    legacy = hashlib.sha256(path.read_bytes()).hexdigest()
    assert file_digest(path, like=legacy) == legacy
    assert file_digest(path, like=new) == new
    assert digests_of([path, path], [legacy, None]) == [legacy, new]


@pytest.mark.parametrize("flipped", [None, "marker.npy", "nodes.arrow"])
def test_a_snapshot_with_sha256_checksums_is_still_verified(tmp_path, flipped):
    """A snapshot an older qortex published (its manifest's checksums bare SHA-256 hex, no
    stamp) loads when whole and is refused when a byte of a file changed."""
    path = snap.publish(tmp_path, make_snapshot(4))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"] = {
        name: hashlib.sha256((path / name).read_bytes()).hexdigest() for name in manifest["files"]
    }
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / STAMP).unlink()
    if flipped is None:
        assert check_whole(snap.load(tmp_path)) == 4
        return
    flip_bytes(path / flipped)
    with pytest.raises(SnapshotError, match=f"checksum mismatch in {flipped}"):
        snap.load(tmp_path)
