"""Files hashed as they are written: the digest is the file's, and a stale one is not given back."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from qortex_core.ingest import snapshot_vectors as vectors
from qortex_core.storage.checksums import HashingWriter, WrittenDigests, sha256_of
from qortex_core.storage.snapshot_files import _save_npy, write_arrow


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
            digest = sink.hexdigest()
        assert digest == sha256_of(tmp_path / name), name
    assert np.array_equal(np.load(tmp_path / "a.npy"), array)
    assert pa.ipc.open_file(str(tmp_path / "t.arrow")).read_all().equals(table)


def test_written_digest_is_forgotten_once_taken_and_refused_when_the_file_changed(tmp_path):
    known = WrittenDigests()
    path = tmp_path / "v.bin"
    path.write_bytes(b"x" * 100)
    known.record(path, sha256_of(path))
    assert known.take(path) == sha256_of(path)
    assert known.take(path) is None  # taken once
    known.record(path, sha256_of(path))
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
    assert vectors.WRITTEN.take(final) == sha256_of(final)
