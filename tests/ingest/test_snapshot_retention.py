"""A published snapshot retires the ones past the retention (``QORTEX_SNAPSHOT_KEEP``): the
newest are kept with ``LATEST``, the tables are untouched, and a snapshot opened before it was
deleted still reads whole."""

from __future__ import annotations

import numpy as np
import pytest

from qortex_bench.synth_corpus import SynthConfig, SynthCorpus
from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.errors import ConfigError
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.snapshot_stage import build_snapshot
from qortex_core.storage import snapshot as snap
from qortex_core.storage.retention import retire_snapshots
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(32))
PARAMS = {"extractor": OfflineExtractor().cache_key}


def test_a_publish_keeps_the_newest_snapshots_and_an_open_one_still_reads(tmp_path, monkeypatch):
    home, corpus = tmp_path / "home", SynthCorpus(SynthConfig(passages=30, seed=5)).passages()
    store = LanceStore.open(home)
    first = index.run_stages(index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus))
    oldest = first["graph_snapshot"].name
    opened = snap.load(home, oldest)  # a reader of the oldest, its arrays mapped
    vectors = np.array(opened.arrays["passage_vectors"])
    second = build_snapshot(store, home, EMBED.name, params=PARAMS, force=True, keep=2)
    assert second.retired == () and snap.list_versions(home) == [oldest, second.name]

    third = build_snapshot(store, home, EMBED.name, params=PARAMS, force=True, keep=2)
    assert third.retired == (oldest,)
    assert snap.list_versions(home) == [second.name, third.name]
    assert snap.latest_name(home) == third.name
    assert not any(p.name.startswith(".trash") for p in snap.snapshots_dir(home).iterdir())
    np.testing.assert_array_equal(opened.arrays["passage_vectors"], vectors)
    assert store.count("passages") == len(corpus)  # no table touched

    monkeypatch.setenv("QORTEX_SNAPSHOT_KEEP", "1")  # the default follows the setting
    fourth = build_snapshot(store, home, EMBED.name, params=PARAMS, force=True)
    assert fourth.retired == (second.name, third.name)
    assert snap.list_versions(home) == [fourth.name]
    assert snap.load(home).manifest["name"] == fourth.name


def test_latest_is_kept_even_when_it_is_not_the_newest_folder(tmp_path):
    home, corpus = tmp_path / "home", SynthCorpus(SynthConfig(passages=20, seed=6)).passages()
    store = LanceStore.open(home)
    first = index.run_stages(index.IngestRun(store, home, OfflineExtractor(), EMBED, corpus))
    newer = build_snapshot(store, home, EMBED.name, params=PARAMS, force=True, keep=5)
    pointer = snap.snapshots_dir(home) / snap.POINTER
    pointer.write_text(first["graph_snapshot"].name + "\n")  # LATEST rolled back to the older one
    assert retire_snapshots(home, 1) == []
    assert snap.list_versions(home) == [first["graph_snapshot"].name, newer.name]
    with pytest.raises(ConfigError, match="at least 1"):
        retire_snapshots(home, 0)
