"""``qortex bench snapshot`` on a small home: a full build and incremental builds of the same
tables, timed in one run; both publish the same files, and a home without a snapshot is one
error line."""

from __future__ import annotations

import json

from qortex_bench.ppr_bench import rss_mb
from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_cli.main import main
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.graph import GraphConfig
from qortex_core.ingest.sequence import SequenceConfig
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore


def test_a_full_and_incremental_builds_publish_the_same_files(tmp_path, capsys):
    home = tmp_path / "home"
    corpus = SynthCorpus(SynthConfig(passages=60, seed=4)).passages()
    config = GraphConfig(synonym_scale=0.5, sequence=SequenceConfig(window=2))  # not defaults
    run = index.IngestRun(
        LanceStore.open(home), home, OfflineExtractor(), HashEmbedder(HashEmbedderConfig(32)),
        corpus, graph_config=config,
    )  # fmt: skip
    first = index.run_stages(run)["graph_snapshot"]
    recorded = snap.load(home).manifest
    out = tmp_path / "report.json"
    assert (
        main(["bench", "snapshot", "--home", str(home), "--repeat", "2", "--json", str(out)]) == 0
    )
    report = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == report
    assert report["full"]["mode"] == "full" and report["full"]["seconds"] > 0
    assert [m["mode"] for m in report["incremental"]] == ["incremental", "incremental"]
    assert report["same_files"] is True
    # what each build wrote: an incremental build links the base's vector and fact files in
    written = [b["written_mib"] for b in (report["full"], *report["incremental"])]
    assert all(isinstance(w, float) and w > 0 for w in written), written
    assert max(written[1:]) < written[0], written
    # each build's own peak: VmHWM, reset before it; the counter only grows until reset, so the
    # last build's recorded peak is at most what it reads now
    peaks = [b["peak_rss_mib"] for b in (report["full"], *report["incremental"])]
    assert all(isinstance(p, int) and p > 0 for p in peaks), peaks
    assert peaks[-1] <= rss_mb("VmHWM") + 1, (peaks, rss_mb("VmHWM"))
    assert report["incremental_ratio"] == round(
        min(m["seconds"] for m in report["incremental"]) / report["full"]["seconds"], 4
    )
    latest = snap.load(home).manifest
    assert latest["name"] == report["incremental"][-1]["name"] != first.name
    assert latest["inputs_digest"] == recorded["inputs_digest"]  # the home's own settings


def test_a_home_without_a_snapshot_is_one_error_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = main(["bench", "snapshot", "--home", str(tmp_path / "empty")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("qortex: ")
