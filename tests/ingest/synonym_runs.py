"""What the synonym stage tests run: the stages before it over a list of passages, and a synonym
run killed between its writes (in a spawned process)."""

from __future__ import annotations

import os
import signal

from qortex_core.embed import HashEmbedder, HashEmbedderConfig
from qortex_core.ingest import stages as index
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.synonym_stage import BASIS, sync_synonyms
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage.store import LanceStore

EMBED = HashEmbedder(HashEmbedderConfig(64))


def index_stages(store: LanceStore, passages) -> LanceStore:
    """The chunks, extraction and embedding stages of ``store`` over ``passages``."""
    extractor = OfflineExtractor()
    index.sync_chunks(store, passages)
    index.extract_chunks(store, extractor, 512)
    index.embed_index(store, EMBED, extractor.cache_key)
    return store


def killed_sync(home: str, config: SynonymConfig = SynonymConfig()) -> None:
    """Run the stage and SIGKILL this process once the edges are updated, before its basis."""
    store = LanceStore.open(home)
    append = store.append

    def die_at_basis(name, rows):
        if name == BASIS:
            os.kill(os.getpid(), signal.SIGKILL)
        append(name, rows)

    store.append = die_at_basis  # type: ignore[method-assign]
    sync_synonyms(store, config, max_drift=1.0)
