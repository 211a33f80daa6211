"""Consolidation: written memories as documents of the same asset graph as files.

The ``documents`` asset calls :func:`memory_documents` beside the source folder: near-duplicate
live records are merged first (identical text, or cosine >= 0.95 between their stored vectors;
the older record survives and its history keeps both writes), the stored vectors are put into
the embedding cache (so the ``embeddings`` stage embeds nothing again), and every live record
becomes one document ``memory:<id>``. Forgotten records are simply absent, so their passages,
facts and orphaned concepts leave the next snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from qortex_core.ingest.documents import DOCUMENTS, Document, Section
from qortex_core.ingest.embed_cache import LanceVectorCache
from qortex_core.memory.fresh import MemoryState
from qortex_core.memory.records import (
    DOC_PREFIX,
    MemoryTable,
    Revision,
    revision_rows,
    utc_now,
    writer_name,
)
from qortex_core.storage import ids
from qortex_core.storage.record_lock import records_lock
from qortex_core.storage.store import LanceStore


@dataclass(frozen=True)
class ConsolidationConfig:
    """Attributes:
    duplicate_cosine: live records at least this similar (stored vectors) are merged.
    block: rows compared per block in the duplicate search (memory: block x n floats).
    """

    duplicate_cosine: float = 0.95
    block: int = 1024


@dataclass(frozen=True)
class MemoryDocs:
    """What consolidation made of the memories table."""

    documents: tuple[Document, ...]
    merged: tuple[tuple[str, str], ...]  # (absorbed record, surviving record)
    cached_vectors: int
    version: int


def load_state(store: LanceStore) -> MemoryState:
    """The memories table folded as it stands now."""
    state = MemoryState(MemoryTable(store))
    state.refresh(force=True)
    return state


def duplicate_pairs(
    state: MemoryState, config: ConsolidationConfig = ConsolidationConfig()
) -> list[tuple[str, str]]:
    """(younger, older) pairs of live records to merge: same text or cosine >= the threshold.

    Each younger record merges into the oldest record it duplicates that is not itself merged.
    """
    live = sorted(state.live_ids, key=lambda r: (state.first_created.get(r, ""), r))
    if len(live) < 2:
        return []
    at = {rid: i for i, rid in enumerate(state.live_ids)}
    vectors = state.vectors[[at[r] for r in live]]  # (n, d) oldest first
    texts = [" ".join(state.current[r]["text"].split()).lower() for r in live]
    first_with: dict[str, int] = {}
    target = np.full(len(live), -1, np.int64)  # index of the older record each one merges into
    for i, text in enumerate(texts):
        if text in first_with:
            target[i] = first_with[text]
        else:
            first_with[text] = i
    for start in range(0, len(live), config.block):
        sims = vectors[start : start + config.block] @ vectors.T  # (b, n)
        for row in range(sims.shape[0]):
            i = start + row
            if target[i] >= 0:
                continue
            older = np.flatnonzero(sims[row, :i] >= config.duplicate_cosine)
            older = older[target[older] < 0]  # merge into survivors only
            if older.size:
                target[i] = int(older[0])
    return [(live[i], live[int(t)]) for i, t in enumerate(target) if t >= 0]


def merge_duplicates(
    store: LanceStore, state: MemoryState, config: ConsolidationConfig = ConsolidationConfig()
) -> list[tuple[str, str]]:
    """Append ``merged``/``merge`` revisions for every duplicate pair; returns the pairs."""
    pairs = duplicate_pairs(state, config)
    if not pairs:
        return []
    writer, now = writer_name("consolidate"), utc_now()
    revisions, metadata, vectors = [], [], []
    at = {rid: i for i, rid in enumerate(state.live_ids)}
    bumped: dict[str, int] = {}
    for young, old in pairs:
        for rid, op, other in ((young, "merged", old), (old, "merge", young)):
            row = state.current[rid]
            revision = bumped.get(rid, int(row["revision"])) + 1
            bumped[rid] = revision
            revisions.append(
                Revision(
                    rid,
                    revision,
                    op,
                    row["text"],
                    row["time"],
                    now,
                    row["source"],
                    row["domain"],
                    writer,
                    other,
                )  # fmt: skip
            )
            metadata.append(json.loads(row["metadata"] or "{}"))
            vectors.append(state.vectors[at[rid]])
    models = {state.current[r].get("model", "") for r, _ in pairs}
    rows = revision_rows(
        revisions, metadata, np.stack(vectors), models.pop() if len(models) == 1 else ""
    )
    MemoryTable(store).append(rows)
    state.absorb(rows)
    return pairs


def seed_embedding_cache(store: LanceStore, state: MemoryState) -> int:
    """Put the stored vectors of live records in the embedding cache, keyed by the model that
    made each (an embedder of that name then finds them; another model misses, as it must)."""
    keys, vectors = [], []
    for i, rid in enumerate(state.live_ids):
        row = state.current[rid]
        if row.get("model"):
            keys.append(ids.embedding_key(row["model"], row["text"]))
            vectors.append(state.vectors[i])
    distinct = dict(zip(keys, vectors))  # two records of one text and model: one key
    cache = LanceVectorCache(store)
    hit = cache.contains(list(distinct))
    todo = [k for k, h in zip(distinct, hit) if not h]
    if todo:
        cache.add(todo, np.stack([distinct[k] for k in todo]).astype(np.float32))  # (n, d)
    return len(todo)


def memory_documents(
    store: LanceStore, config: ConsolidationConfig = ConsolidationConfig()
) -> MemoryDocs:
    """Merge duplicates, seed the embedding cache and return one document per live record."""
    with records_lock(store.config.home):  # merges are revisions: planned on the newest rows
        state = load_state(store)
        merged = merge_duplicates(store, state, config)
    cached = seed_embedding_cache(store, state)
    state.table.optimize()  # fold the appended rows into the full-text index (incremental)
    docs = []
    for rid in state.live_ids:
        row = state.current[rid]
        docs.append(
            Document(
                DOC_PREFIX + rid,
                row["domain"],
                "memory",
                (Section("", row["text"], row["time"]),),
                ids.digest(row["text"], row["time"] or "", size=16),
            )
        )
    docs.sort(key=lambda d: d.doc_id)
    return MemoryDocs(tuple(docs), tuple(merged), cached, state.version)


def forgotten_passages(store: LanceStore) -> set[str]:
    """File passages forgotten by id whose file has not changed since."""
    state = load_state(store)
    if not state.forgotten_passages:
        return set()
    rows = store.read(DOCUMENTS)
    now = (
        dict(zip(rows["id"].to_pylist(), rows["content_hash"].to_pylist())) if rows.num_rows else {}
    )
    out = set()
    for pid, mark in state.forgotten_passages.items():
        doc_id, _, digest = mark.partition("\0")
        if now.get(doc_id) == digest:
            out.add(pid)
    return out
