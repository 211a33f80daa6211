"""A published snapshot's stamp (storage/snapshot_stamp.py): files unchanged since they were
hashed load without being read again; any write to one, even at once, is still caught; a
broken stamp only means hashing; `qortex doctor` hashes every file whatever the stamp says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qortex_core.errors import SnapshotError
from qortex_core.ops.doctor import check_snapshots
from qortex_core.storage import snapshot as snap
from qortex_core.storage.snapshot_stamp import STAMP
from tests.storage.test_snapshot import check_whole, flip_bytes, make_snapshot


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files each load hashes, in the order asked."""
    seen: list[str] = []
    real = snap.digests_of

    def recording(paths: list[Path], like: list[str | None] | None = None) -> list[str | None]:
        seen.extend(p.name for p in paths)
        return real(paths, like)

    monkeypatch.setattr(snap, "digests_of", recording)
    return seen


def test_a_published_snapshot_loads_without_hashing_its_files(tmp_path, hashed):
    path = snap.publish(tmp_path, make_snapshot(3))
    assert (path / STAMP).is_file()
    assert check_whole(snap.load(tmp_path)) == 3
    assert hashed == []
    snap.load(tmp_path, rehash=True)  # ... unless asked to
    assert sorted(hashed) == sorted(snap.load(tmp_path).manifest["files"])


@pytest.mark.parametrize("fname", ["marker.npy", "nodes.arrow"])
def test_a_write_right_after_publishing_is_caught(tmp_path, fname):
    path = snap.publish(tmp_path, make_snapshot(1))
    flip_bytes(path / fname)  # same size, within the clock tick of the stamp
    with pytest.raises(SnapshotError, match=f"checksum mismatch in {fname}"):
        snap.load(tmp_path)


@pytest.mark.parametrize("stamp", ["{not json", "[]", '{"marker.npy": {"digest": "0"}}'])
def test_a_broken_stamp_means_hashing_and_is_written_anew(tmp_path, hashed, stamp):
    path = snap.publish(tmp_path, make_snapshot(2))
    (path / STAMP).write_text(stamp)
    assert check_whole(snap.load(tmp_path)) == 2
    files = sorted(snap.load(tmp_path, verify=False).manifest["files"])
    assert sorted(hashed) == files  # every file hashed once: the stamp was written again
    snap.load(tmp_path)
    assert sorted(hashed) == files


def test_doctor_hashes_what_the_stamp_cannot_see(tmp_path):
    path = snap.publish(tmp_path, make_snapshot(4))
    target = path / "marker.npy"
    before = target.stat()
    flip_bytes(target)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # the time put back
    snap.load(tmp_path)  # trusted: what a stamp cannot see
    with pytest.raises(SnapshotError, match="checksum mismatch in marker.npy"):
        snap.load(tmp_path, rehash=True)
    (check,) = check_snapshots(tmp_path)
    assert not check.ok and "checksum mismatch" in check.detail
