"""``qortex doctor``: a real home built by the stage functions, then damaged one way at a time."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from qortex_cli.main import main
from qortex_core.errors import HomeError
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ops.doctor import DoctorConfig, diagnose
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Passage
from qortex_core.storage.store import LanceStore

PASSAGES = [
    Passage("Orlan Vesk is a composer. He was born in Ostrania.", "Orlan Vesk"),
    Passage("Ostrania is governed from Velmora, where its parliament sits.", "Ostrania"),
    Passage("Ivo Lark is a painter known for harbour landscapes in Velmora.", "Ivo Lark"),
]


def build_home(home: Path, passages: list[Passage], embedder) -> Path:
    """Index ``passages`` into ``home`` through the stage functions; returns the snapshot path."""
    return index.build_index(LanceStore.open(home), home, passages, OfflineExtractor(), embedder)


@pytest.fixture(scope="module")
def built_home(tmp_path_factory, embedder) -> Path:
    home = tmp_path_factory.mktemp("doctor") / "home"
    build_home(home, PASSAGES, embedder)
    index.build_snapshot(LanceStore.open(home), home, embedder.name, force=True)  # identical
    assert len(snap.list_versions(home)) == 2
    return home


@pytest.fixture
def home(built_home, tmp_path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(built_home, copy)
    return copy


def make_old(path: Path) -> None:
    past = time.time() - 3600
    os.utime(path, (past, past), follow_symlinks=False)


def test_healthy_home(home, embedder):
    report = diagnose(home, embedder)
    assert report.healthy, report.problems
    assert report.tables["chunks"] == 3 and report.tables["passages"] == 3
    assert report.tables["concepts"] > 0
    names = [c.name for c in report.checks]
    assert (
        sum(n.startswith("snapshot ") for n in names) == 2
        and "pointer" in names
        and "probe" in names
    )


def test_bad_checksum_in_old_snapshot_is_reported(home, embedder):
    old = snap.list_versions(home)[0]
    (home / "snapshots" / old / "fact_vectors.npy").write_bytes(b"\x93NUMPY garbage")
    report = diagnose(home, embedder)
    assert [c.name for c in report.problems] == [f"snapshot {old}"]
    assert "checksum mismatch in fact_vectors.npy" in report.problems[0].detail


def test_truncated_latest_fails_checksum_and_probe(home, embedder):
    latest = snap.latest_name(home)
    path = home / "snapshots" / latest / "passage_vectors.npy"
    path.write_bytes(path.read_bytes()[:100])
    names = {c.name for c in diagnose(home, embedder).problems}
    assert names == {f"snapshot {latest}", "probe"}


def test_dangling_pointer(home, embedder):
    (home / "snapshots" / snap.POINTER).write_text("v000009-0123abcd\n")
    problems = diagnose(home, embedder, DoctorConfig(probe=False)).problems
    assert (
        len(problems) == 1
        and problems[0].name == "pointer"
        and "v000009-0123abcd" in problems[0].detail
    )


def test_orphans_reported_once_stale(home, embedder):
    root = home / "snapshots"
    tmp_dir = root / ".tmp-0123456789abcdef"
    tmp_dir.mkdir()
    (tmp_dir / "adj_data.npy").write_bytes(b"partial")
    pointer_tmp = root / f".{snap.POINTER}.feedbeef"
    pointer_tmp.write_text("v000001-00000000\n")
    config = DoctorConfig(probe=False)
    assert diagnose(home, embedder, config).healthy  # fresh: may be a publish in progress
    make_old(tmp_dir)
    make_old(pointer_tmp)
    problems = diagnose(home, embedder, config).problems
    assert {p.name for p in problems} == {f"orphan {tmp_dir.name}", f"orphan {pointer_tmp.name}"}
    assert any("interrupted publish" in p.detail for p in problems)


def test_damaged_table_is_reported(home, embedder):
    data = home / "lancedb" / "facts.lance" / "data"
    for f in data.iterdir():
        f.write_bytes(b"not lance")
    problems = diagnose(home, embedder, DoctorConfig(probe=False)).problems
    assert [p.name for p in problems] == ["table facts"]


def test_missing_home_is_a_user_error(tmp_path):
    with pytest.raises(HomeError, match="does not exist"):
        diagnose(tmp_path / "nope")
    assert not (tmp_path / "nope").exists()


def test_cli_exit_codes_and_json(home, capsys):
    assert main(["doctor", "--home", str(home), "--no-probe"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("healthy") and "PROBLEM" not in out
    latest = snap.latest_name(home)
    (home / "snapshots" / latest / "adj_indptr.npy").write_bytes(b"x")
    assert main(["doctor", "--home", str(home), "--no-probe", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["healthy"] is False and report["tables"]["passages"] == 3
    bad = [c for c in report["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == [f"snapshot {latest}"]
    assert main(["doctor", "--home", str(home / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qortex: error: data home") and len(err.strip().splitlines()) == 1


def test_tenant_namespace(home, tmp_path, capsys):
    multi = tmp_path / "multi"
    shutil.copytree(home, multi / "tenants" / "team-a")
    assert main(["doctor", "--home", str(multi), "--tenant", "team-a", "--no-probe"]) == 0
    capsys.readouterr()
    assert (
        main(["doctor", "--home", str(multi), "--no-probe"]) == 1
    )  # the default namespace holds nothing
    assert "tenants here: team-a" in capsys.readouterr().out
    assert main(["doctor", "--home", str(multi), "--tenant", "Bad Name"]) == 2
    assert "bad tenant name" in capsys.readouterr().err


def test_probe_sees_vectors_out_of_step_with_passages(home, embedder):
    """A snapshot whose checksums are right but whose passage vectors belong to other rows."""
    loaded = snap.load(home)
    arrays = dict(
        loaded.arrays, passage_vectors=np.asarray(loaded.arrays["passage_vectors"])[::-1].copy()
    )
    snap.publish(
        home,
        snap.Snapshot(
            arrays=arrays,
            tables=dict(loaded.tables),
            manifest={k: v for k, v in loaded.manifest.items() if k not in ("files", "name")},
        ),
    )
    problems = diagnose(home, embedder).problems
    assert [p.name for p in problems] == ["probe"] and "vectors do not match" in problems[0].detail


def test_incomplete_manifest_is_named_by_doctor(home, embedder):
    """Checksums match but the manifest no longer lists an array: doctor names what is missing."""
    latest = snap.snapshots_dir(home) / snap.latest_name(home)
    manifest = json.loads((latest / "manifest.json").read_text())
    del manifest["files"]["phrase_text_frequency.npy"], manifest["counts"]["contains"]
    (latest / "manifest.json").write_text(json.dumps(manifest))
    report = diagnose(home, embedder)
    problems = {p.name: p.detail for p in report.problems}
    assert set(problems) == {f"snapshot {latest.name}", "probe"}
    for detail in problems.values():
        assert "no array phrase_text_frequency" in detail and "no count contains" in detail


def test_doctor_and_the_asset_check_name_an_embedder_mismatch(home, embedder):
    """The same probe serves ``qortex doctor`` and the ``snapshot_answers_probe`` asset check."""
    from qortex_core.embed import EmbedderWrapper
    from qortex_core.ops.doctor import check_probe

    class Renamed(EmbedderWrapper):
        name = "other-model"

    check = check_probe(home, Renamed(embedder))
    latest = snap.latest_name(home)
    assert not check.ok and check.detail == (
        f"snapshot {latest} was embedded with {embedder.name!r} (384-d) but the embedder is "
        "'other-model'"
    )
    assert check_probe(home, embedder).ok
    # without the probe too: the embedder check reads the manifest and the arrays' widths
    assert [p.name for p in diagnose(home, Renamed(embedder)).problems] == ["embedder", "probe"]
    no_probe = diagnose(home, Renamed(embedder), DoctorConfig(probe=False)).problems
    assert [p.name for p in no_probe] == ["embedder"]
