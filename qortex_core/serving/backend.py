"""What the MCP tools call: one :class:`~qortex_core.agent.aio.AsyncMemory` per tenant.

The embedder loads on a background thread started with the server (:class:`WarmEmbedder`), so
``initialize`` and ``tools/list`` answer at once; the first call that embeds waits for it. Each
tenant's memory runs its calls one at a time on its own worker thread (a
:class:`~qortex_core.agent.api.Memory` is not for several threads at once); tenants run in
parallel and share the one model.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from qortex_core.embed import Embedder

if TYPE_CHECKING:  # the memory API loads on the first call, not at server start
    from qortex_core.agent.aio import AsyncMemory


class WarmEmbedder:
    """An embedder that loads (and runs one warm-up embedding) on a daemon thread.

    :meth:`start` begins the load; ``name``, ``dim`` and ``embed`` wait for it (starting it if
    nothing did). A load that failed raises its error on every use: a missing model is reported
    by the first call that needs it, not at start.
    """

    def __init__(self, make: Callable[[], Embedder]) -> None:
        self._make = make
        self._future: Future[Embedder] = Future()
        self._started = threading.Lock()

    def start(self) -> WarmEmbedder:
        """Start loading on a daemon thread (once); returns self."""
        if self._started.acquire(blocking=False):
            threading.Thread(target=self._load, name="qortex-embedder", daemon=True).start()
        return self

    def _load(self) -> None:
        try:
            embedder = self._make()
            embedder.embed(["warm up"])
        except BaseException as exc:  # reported to whichever call needs the model
            self._future.set_exception(exc)
        else:
            self._future.set_result(embedder)

    @property
    def ready(self) -> bool:
        """True once the model is loaded (or failed to load)."""
        return self._future.done()

    @property
    def inner(self) -> Embedder:
        """The loaded embedder (starts loading if nothing did yet, and waits for it)."""
        return self.start()._future.result()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed(texts)


@dataclass(frozen=True)
class Backend:
    """Attributes:
    home: the data home (None: ``$QORTEX_HOME`` or ``~/.qortex``).
    embedder: shared by every tenant's memory.
    consolidate: runs ``qortex consolidate`` for (home, tenant) and returns its JSON summary
        (None: the server has no consolidate tool).
    """

    home: str | Path | None
    embedder: Any
    consolidate: Callable[[str | Path | None, str], dict] | None = None


class Tenants:
    """Tenant name -> its memory, opened on first use."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._memories: dict[str, AsyncMemory] = {}
        self._lock = threading.Lock()

    async def memory(self, tenant: str) -> AsyncMemory:
        """The tenant's memory (opened once; a bad tenant name raises ConfigError)."""
        found = self._memories.get(tenant)
        return found if found is not None else await asyncio.to_thread(self._open, tenant)

    def _open(self, tenant: str) -> AsyncMemory:
        from qortex_core.agent.aio import AsyncMemory
        from qortex_core.agent.api import Memory, MemoryOptions

        with self._lock:
            if tenant not in self._memories:
                memory = Memory(
                    self.backend.home, tenant, self.backend.embedder, MemoryOptions(channel="mcp")
                )
                self._memories[tenant] = AsyncMemory(memory)
            return self._memories[tenant]

    async def close(self) -> None:
        for memory in self._memories.values():
            await memory.aclose()
