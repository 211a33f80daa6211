"""Passages of ingested files seen as memories: get, history and forget by passage id.

A file passage is forgotten by a ``forget`` row keyed by its id whose ``target`` holds
``doc_id\\0content hash`` of its file at that moment; it stays hidden while the file keeps that
hash (when the file changes, the passage may come back).
"""

from __future__ import annotations

from qortex_core.errors import RecordError
from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.memory.fresh import MemoryState
from qortex_core.memory.records import MemoryRecord
from qortex_core.storage.store import PASSAGES, LanceStore


def doc_hash(store: LanceStore, doc_id: str) -> str:
    """The content hash of a document now ("" when it is gone)."""
    rows = store.read_where(DOCUMENTS, "id", [doc_id])
    return rows["content_hash"][0].as_py() if rows.num_rows else ""


def passage_record(store: LanceStore, state: MemoryState, passage_id: str, tenant: str):
    """A file passage as a :class:`MemoryRecord` (tier ``graph``).

    Raises:
        RecordError: no passage with that id in this tenant's home.
    """
    rows = store.read_where(PASSAGES, "id", [passage_id])
    if rows.num_rows == 0:
        raise RecordError(f"unknown passage id {passage_id!r} (tenant {tenant})")
    row = rows.drop_columns(["vector"]).to_pylist()[0]
    state.refresh()
    gone = state.forgotten_passages.get(passage_id)
    hidden = gone is not None and gone.partition("\0")[2] == doc_hash(store, row["doc_id"])
    text = row["text"] if not row.get("title") else f"{row['title']}\n{row['text']}"
    stamp = row.get("ingested_at") or ""
    return MemoryRecord(
        passage_id, text, row.get("time"), stamp, stamp, row["doc_id"], row["domain"],
        tier="graph", forgotten=hidden,
    )  # fmt: skip
