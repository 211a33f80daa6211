"""qortex: long-term memory for LLM agents (HippoRAG-style graph retrieval).

The agent API (imported lazily, so ``import qortex_core`` stays light)::

    mem = qortex_core.open("~/.qortex")
    record = mem.remember("The Orion Pump is serviced every spring.", time="2026-03-01")
    result = mem.search("When is the pump serviced?")

    amem = qortex_core.open_async("~/.qortex")  # the same methods as coroutines
    record = await amem.remember("The pump's filter was changed.")

    retriever = qortex_core.Retriever.open("~/.qortex")  # read-only, from the latest snapshot
    answer = retriever.query("Who services the Orion Pump?", top_k=5)

Every public name is listed in :data:`_EXPORTS` (name -> module); ``__all__`` is its keys.
"""

from __future__ import annotations

import importlib
import typing

# public name -> the module that defines it (add a name here and nowhere else)
_EXPORTS = {
    "open": "qortex_core.agent.api:open_memory",
    "Memory": "qortex_core.agent.api",
    "open_async": "qortex_core.agent.aio",
    "AsyncMemory": "qortex_core.agent.aio",
    "MemoryRecord": "qortex_core.memory.records",
    "Revision": "qortex_core.memory.records",
    "Retriever": "qortex_core.query.retriever",
    "RetrievalConfig": "qortex_core.query.config",
    "QueryResult": "qortex_core.query.results",
    "PassageHit": "qortex_core.query.results",
    "ConceptHit": "qortex_core.query.results",
    "Seed": "qortex_core.query.results",
    "Settings": "qortex_core.settings",
    "get_settings": "qortex_core.settings",
    "QortexError": "qortex_core.errors",
    "ConfigError": "qortex_core.errors",
    "DatasetError": "qortex_core.errors",
    "FormatError": "qortex_core.errors",
    "HomeError": "qortex_core.errors",
    "QueryError": "qortex_core.errors",
    "RecognitionError": "qortex_core.errors",
    "RecordError": "qortex_core.errors",
    "RevisionConflict": "qortex_core.errors",
    "SnapshotError": "qortex_core.errors",
    "StorageError": "qortex_core.errors",
}

__all__ = sorted(_EXPORTS, key=str.casefold)


def __getattr__(name: str) -> typing.Any:
    """Import a public name on first use."""
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'qortex_core' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
