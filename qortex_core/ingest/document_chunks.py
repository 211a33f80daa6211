"""The chunks stage from the stored documents: chunk sizing in the embedder's own tokens (once,
for the Dagster asset, the shard steps and the benchmarks), and a run that does nothing when the
documents table has not been written since the chunks were made from it (nor loads the
embedder's tokenizer to find that out)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

from qortex_core.embed import TokenWindow
from qortex_core.ingest import chunk_increment as increment
from qortex_core.ingest.chunk_stage import ChunkReport, sync_chunks
from qortex_core.ingest.chunking import ChunkConfig, chunk_documents
from qortex_core.ingest.documents import DOCUMENTS, Document, read_stored_documents
from qortex_core.ingest.stage_inputs import upstream_marks
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CHUNKS, LanceStore

CHUNKS_STATE = "chunks_inputs"  # stage-state row: the documents table's mark chunked last
SIZING_STATE = "chunks_sizing"  # stage-state row: the sizing those chunks were made with


def chunk_sizing(window: TokenWindow, max_tokens: int = 512, overlap_tokens: int = 64) -> dict:
    """The chunk size (capped by the embedder's window: title and chunk fit it) and overlap."""
    size = min(max_tokens, window.max_tokens)
    return {
        "max_tokens": size,
        "overlap_tokens": min(overlap_tokens, size // 2),
        "tokenizer": window.tokenizer,
        "embedder_window": window.max_tokens,
    }


def chunk(
    window: TokenWindow, documents: list[Document], max_tokens: int = 512, overlap_tokens: int = 64
) -> tuple[list[Passage], dict]:
    """The documents' passages and the sizing metadata (sizes, tokenizer, longest chunk)."""
    sizing = chunk_sizing(window, max_tokens, overlap_tokens)
    config = ChunkConfig(sizing["max_tokens"], sizing["overlap_tokens"])
    passages = chunk_documents(documents, config, window.count)
    longest = max((window.count(p.full_text) for p in passages), default=0)
    return passages, {**sizing, "longest_chunk_tokens": longest}


@dataclass(frozen=True)
class ChunkRun:
    """A chunks run: the table's report, the passages made (none when nothing changed), the
    sizing, and whether it ran."""

    report: ChunkReport
    passages: list[Passage] = field(default_factory=list)
    sizing: dict = field(default_factory=dict)
    mode: str = "full"  # "unchanged": the documents table was not written since last time
    reason: str = ""


def chunk_stored(
    store: LanceStore,
    window: TokenWindow | Callable[[], TokenWindow],
    hidden: set[str],
    max_tokens: int = 512,
    overlap_tokens: int = 64,
    identity: str | None = None,
) -> ChunkRun:
    """Make the chunks table hold the stored documents' passages but the ``hidden`` ones
    (forgotten file passages); nothing is read when neither the documents table, the hidden set
    nor the sizing changed since the last run, and only the documents whose signature moved
    are chunked when the change allows it (:mod:`qortex_core.ingest.chunk_increment`).

    Args:
        store: the data home's store.
        window: the embedder's token window, or a function that returns it, called only when
            there is something to chunk (a local model is then not loaded by an unchanged run).
        hidden: passage ids left out.
        max_tokens: the chunk size cap.
        overlap_tokens: the overlap between neighbouring chunks.
        identity: what the window depends on (the embedder's name); None: the window's own
            tokenizer and size (the window is then made at once).
    """
    made = window if callable(window) else (lambda: window)
    if identity is None:
        now = made()
        identity = f"{now.tokenizer}/{now.max_tokens}"
    settings = json.dumps([identity, max_tokens, overlap_tokens, sorted(hidden)])
    inputs = upstream_marks(store, (DOCUMENTS, CHUNKS), settings)
    if store.stage_digest(CHUNKS_STATE) == inputs and store.count(CHUNKS):
        total = store.count(CHUNKS)
        why = "the documents table was not written since these chunks were made from it"
        return ChunkRun(ChunkReport(total, 0, 0), [], _stored_sizing(store), "unchanged", why)
    sizes = (max_tokens, overlap_tokens)
    run = _increment(store, made, hidden, sizes, settings) or _full(
        store, made, hidden, sizes, settings
    )
    store.set_stage_digest(CHUNKS_STATE, upstream_marks(store, (DOCUMENTS, CHUNKS), settings))
    return run


def _stored_sizing(store: LanceStore) -> dict:
    return json.loads(store.stage_digest(SIZING_STATE) or "{}")


def _full(
    store: LanceStore,
    window: Callable[[], TokenWindow],
    hidden: set[str],
    sizes: tuple[int, int],
    settings: str,
) -> ChunkRun:
    """Every stored document chunked; only new chunks written, the others' rows dropped."""
    passages, sizing = chunk(window(), read_stored_documents(store), *sizes)
    passages = [p for p in passages if p.id not in hidden]
    report = sync_chunks(store, passages)
    store.set_stage_digest(SIZING_STATE, json.dumps(sizing, sort_keys=True))
    increment.record_full(store, settings, passages)
    why = "documents changed: every stored document chunked, only new chunks written"
    return ChunkRun(report, passages, sizing, "full", why)


def _increment(
    store: LanceStore,
    window: Callable[[], TokenWindow],
    hidden: set[str],
    sizes: tuple[int, int],
    settings: str,
) -> ChunkRun | None:
    """Only the documents whose signature moved chunked, only their rows touched (None: the
    full stage must run; :mod:`qortex_core.ingest.chunk_increment` says when)."""
    change = increment.change_since(store, settings)
    if change is None:
        return None
    docs = read_stored_documents(store, list(change.changed))
    passages, sizing = chunk(window(), docs, *sizes) if docs else ([], _stored_sizing(store))
    passages = [p for p in passages if p.id not in hidden]
    shared = increment.shared_ids(store)
    done = increment.plan(store, change, passages, shared)
    if done is None:
        return None
    report = increment.apply(store, change, done, shared, settings)
    why = (
        f"{len(change.changed)} documents new or changed and {len(change.removed)} gone since "
        "their chunks were made: only those chunked, only their rows written"
    )
    return ChunkRun(report, passages, sizing, "incremental", why)
