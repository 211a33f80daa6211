"""The agent's memory for asyncio: ``mem = qortex_core.open_async(home)``, then ``await`` each call.

:class:`AsyncMemory` has the methods of :class:`~qortex_core.agent.api.Memory` as coroutines.
Each call runs on the memory's own worker thread, so the event loop keeps running while LanceDB
reads and writes, the embedder encodes or the walk runs. A :class:`Memory` keeps in-process
state (the folded memories table, the loaded snapshot, the query log) that is not meant for
several threads at once: one worker thread runs the calls one at a time, in the order they were
made. Writes are as durable as the synchronous ones: a call whose awaiting task is cancelled
still finishes on the worker (a remember returns after Lance committed it, or not at all).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, TypeVar

from qortex_core.agent.api import Memory, MemoryOptions
from qortex_core.memory.records import MemoryRecord, Revision

T = TypeVar("T")


class AsyncMemory:
    """One tenant's memory under one data home, with coroutine methods (see :func:`open_async`).

    Attributes:
        sync: the :class:`Memory` the calls run on (use it only from the worker, or after
            :meth:`aclose`).
    """

    def __init__(self, memory: Memory) -> None:
        self.sync = memory
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qortex-memory")

    @property
    def home(self) -> Path | str:
        return self.sync.home

    @property
    def tenant(self) -> str:
        return self.sync.tenant

    async def _run(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``method(*args, **kwargs)`` on the worker thread; the loop runs meanwhile."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, functools.partial(method, *args, **kwargs))

    # -- writes -----------------------------------------------------------------------------
    async def remember(self, text: str, **options: Any) -> MemoryRecord:
        """:meth:`Memory.remember` (``time``, ``source``, ``domain``, ``metadata``)."""
        return await self._run(self.sync.remember, text, **options)

    async def remember_many(self, texts: builtins.list[str], **options: Any) -> list[MemoryRecord]:
        """:meth:`Memory.remember_many`: one embedding batch and one append (all or none)."""
        return await self._run(self.sync.remember_many, texts, **options)

    async def update(self, record_id: str, text: str, **options: Any) -> MemoryRecord:
        """:meth:`Memory.update` (``time``, ``expected_revision``)."""
        return await self._run(self.sync.update, record_id, text, **options)

    async def forget(self, record_id: str, **options: Any) -> MemoryRecord:
        """:meth:`Memory.forget` (``expected_revision``)."""
        return await self._run(self.sync.forget, record_id, **options)

    # -- reads ------------------------------------------------------------------------------
    async def get(self, record_id: str) -> MemoryRecord:
        """:meth:`Memory.get`."""
        return await self._run(self.sync.get, record_id)

    async def list(self, **options: Any) -> builtins.list[MemoryRecord]:
        """:meth:`Memory.list` (``domain``, ``since``, ``until``, ``limit``)."""
        return await self._run(self.sync.list, **options)

    async def history(self, record_id: str) -> builtins.list[Revision]:
        """:meth:`Memory.history`."""
        return await self._run(self.sync.history, record_id)

    async def search(self, query: str, **options: Any):
        """:meth:`Memory.search` (``top_k``, ``mode``, ``since``, ``until``, ``domain``, ...)."""
        return await self._run(self.sync.search, query, **options)

    async def feedback(self, query_id: str, **judgements: Any):
        """:meth:`Memory.feedback` (``accepted``, ``rejected``, ``partial``)."""
        return await self._run(self.sync.feedback, query_id, **judgements)

    # -- the graph --------------------------------------------------------------------------
    async def neighbors(self, name: str, **options: Any):
        """:meth:`Memory.neighbors` (``depth``, ``limit``)."""
        return await self._run(self.sync.neighbors, name, **options)

    async def path(self, source: str, target: str, **options: Any):
        """:meth:`Memory.path` (``max_len``)."""
        return await self._run(self.sync.path, source, target, **options)

    async def entity(self, name: str, **options: Any):
        """:meth:`Memory.entity` (``limit``)."""
        return await self._run(self.sync.entity, name, **options)

    # -- lifetime ---------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Wait for the calls already made, then stop the worker thread."""
        await asyncio.get_running_loop().run_in_executor(None, self._worker.shutdown)

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def open_async(
    home: str | Path | None = None, tenant: str | None = None, embedder=None, **options
) -> AsyncMemory:
    """One tenant's memory under ``home`` for asyncio (default ``$QORTEX_HOME`` or
    ``~/.qortex``); ``options`` as :func:`qortex_core.open` takes them.

    Raises:
        RecordError: a bad tenant name; HomeError: the home cannot be opened.
    """
    return AsyncMemory(Memory(home, tenant, embedder, MemoryOptions(**options)))
