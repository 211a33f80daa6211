"""Options of :class:`~qortex_core.agent.api.Memory`."""

from __future__ import annotations

from dataclasses import dataclass

from qortex_core.memory.fresh import FreshConfig
from qortex_core.redact import RedactionConfig


@dataclass(frozen=True)
class MemoryOptions:
    """Attributes:
    channel: who writes, recorded in each revision (library, cli, mcp).
    redaction: secrets removed from written text, as on the file path.
    fresh: fresh-tier refresh and lexical settings.
    snapshot_check_s: the ``LATEST`` pointer is checked at most this often.
    resolver: an LLM resolve step for supersession (:mod:`qortex_core.memory.resolve`); None:
        the environment's (``QORTEX_SUPERSEDE_RESOLVE=llm``), else offline.
    """

    channel: str = "library"
    redaction: RedactionConfig = RedactionConfig()
    fresh: FreshConfig = FreshConfig()
    snapshot_check_s: float = 0.2
    resolver: object | None = None
