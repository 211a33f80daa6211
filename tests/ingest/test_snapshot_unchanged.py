"""An unchanged snapshot build reads nothing: every input table, the full-text one too, at the
versions the latest snapshot states it was built from is answered from its manifest, with no
passage read and no full-text plan; a latest snapshot that does not load is built again."""

from __future__ import annotations

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.snapshot_stage import build_snapshot
from qortex_core.storage import fulltext
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(32))


def _refuse(*args, **kwargs):
    raise AssertionError("an unchanged build read its inputs")


def test_an_unchanged_build_reads_no_input_and_a_damaged_latest_is_rebuilt(tmp_path, monkeypatch):
    home, corpus = tmp_path / "home", SynthCorpus(SynthConfig(passages=40, seed=3)).passages()
    store = LanceStore.open(home)
    first = index.run_stages(index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus))
    published, params = first["graph_snapshot"], {"extractor": OfflineExtractor().cache_key}
    with monkeypatch.context() as mp:
        mp.setattr(LanceStore, "read_without", _refuse)
        mp.setattr(fulltext, "plan_sync", _refuse)
        again = build_snapshot(store, home, EMBED.name, params=params)
    assert (again.mode, again.name) == ("unchanged", published.name)
    assert snap.list_versions(home) == [published.name]

    target = published.path / "nodes.arrow"  # the latest no longer loads: built again
    target.write_bytes(target.read_bytes()[:-16])
    rebuilt = build_snapshot(store, home, EMBED.name, params=params)
    assert rebuilt.mode == "full" and rebuilt.name != published.name
    assert "unusable" in rebuilt.reason and snap.load(home).manifest["name"] == rebuilt.name
