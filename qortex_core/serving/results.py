"""What the MCP tools return beside the library's own records: JSON objects with typed schemas.

A tool's structured output must be a JSON object, so lists come wrapped (``records``,
``revisions``); every type here is a :class:`~qortex_core.jsonable.JsonRecord`, whose
``json_schema()`` is the tool's ``outputSchema``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qortex_core.feedback.events import FeedbackEvent
from qortex_core.jsonable import JsonRecord
from qortex_core.memory.records import MemoryRecord, Revision


@dataclass(frozen=True)
class FeedbackSummary(JsonRecord):
    """``qortex_feedback``'s answer: the judgements recorded and the concepts they adjust."""

    query_id: str
    recorded: int
    concepts: list[str]
    events: list[FeedbackEvent] = field(default_factory=list)


@dataclass(frozen=True)
class History(JsonRecord):
    """``qortex_history``'s answer: every revision of one record, oldest first."""

    id: str
    revisions: list[Revision]


@dataclass(frozen=True)
class RecordList(JsonRecord):
    """``qortex_list``'s answer: live written memories, newest event first."""

    records: list[MemoryRecord]
    count: int


@dataclass(frozen=True)
class Consolidation(JsonRecord):
    """``qortex_consolidate``'s answer: what the Dagster job folded into the new snapshot."""

    snapshot: str
    snapshot_version: int = 0
    memories: int = 0
    merged_memories: int = 0
    documents: int = 0
    chunks: int = 0
    concepts: int = 0
    facts: int = 0
    run_id: str = ""
    checks: dict[str, bool] = field(default_factory=dict)
