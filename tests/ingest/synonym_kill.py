"""A synonym stage run killed between its writes (run in a spawned process by the tests)."""

from __future__ import annotations

import os
import signal

from qortex_core.ingest.synonym_stage import BASIS, sync_synonyms
from qortex_core.ingest.synonyms import SynonymConfig
from qortex_core.storage.store import LanceStore


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
