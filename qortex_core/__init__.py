"""qortex: long-term memory for LLM agents (HippoRAG-style graph retrieval).

The agent API (imported lazily, so ``import qortex_core`` stays light)::

    mem = qortex_core.open("~/.qortex")
    record = mem.remember("The Orion Pump is serviced every spring.", time="2026-03-01")
    result = mem.search("When is the pump serviced?")
"""

from __future__ import annotations

__all__ = ["Memory", "MemoryRecord", "Revision", "open"]


def __getattr__(name: str):
    if name == "open":
        from qortex_core.memory.api import open_memory

        return open_memory
    if name == "Memory":
        from qortex_core.memory.api import Memory

        return Memory
    if name in ("MemoryRecord", "Revision"):
        from qortex_core.memory import records

        return getattr(records, name)
    raise AttributeError(f"module 'qortex_core' has no attribute {name!r}")
