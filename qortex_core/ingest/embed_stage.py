"""The embeddings stage: passages, concepts, facts and rules tables with vectors from the
embedding cache (the synonym edges between close concepts: :mod:`.synonym_stage`).

Incremental: unchanged inputs (by digest) leave the tables as they are."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from qortex_core.embed import Embedder
from qortex_core.ingest.allocators import give_back
from qortex_core.ingest.chunk_stage import (
    ExtractionJson,
    Progress,
    no_progress,
    read_chunks,
)
from qortex_core.ingest.embed_cache import CachedEmbedder, LanceVectorCache
from qortex_core.ingest.node_tables import ChunkKey, NodeTables
from qortex_core.storage import ids
from qortex_core.storage.model import Passage, fact_text
from qortex_core.storage.store import (
    CONCEPTS,
    FACTS,
    PASSAGES,
    RULES,
    LanceStore,
    vectors_to_arrow,
)


# -- embeddings ---------------------------------------------------------------------------
@dataclass(frozen=True)
class EmbedReport:
    passages: int
    concepts: int
    facts: int
    rules: int
    texts_embedded: int
    cache_hits: int


def _node_texts(name: str, rows: pa.Table) -> list[str]:
    """The embedded text of each concept (its name), fact (:func:`fact_text`) or rule."""
    if name == FACTS:
        parts = (rows[c].to_pylist() for c in ("subject", "predicate", "object"))
        return [fact_text(*t) for t in zip(*parts)]
    return rows["name" if name == CONCEPTS else "text"].to_pylist()


def _with_vectors(columns: dict[str, list] | pa.Table, vectors: np.ndarray) -> pa.Table:
    table = columns if isinstance(columns, pa.Table) else pa.table(columns)
    return (
        table.append_column("vector", vectors_to_arrow(vectors))
        if len(vectors)
        else table.append_column("vector", pa.array([], type=pa.list_(pa.float32(), 1)))
    )


def _passage_rows(chunks: Sequence[Passage]) -> pa.Table:
    """The passages table's columns but the vectors: one row per chunk."""
    return pa.table(
        {
            "id": [p.id for p in chunks],
            "doc_id": [p.doc_id for p in chunks],
            "title": [p.title for p in chunks],
            "text": [p.text for p in chunks],
            "domain": [p.domain for p in chunks],
            "time": pa.array([p.time for p in chunks], pa.string()),
            "ingested_at": pa.array([p.ingested_at for p in chunks], pa.string()),
        }
    )


BLOCK_ROWS = 1_000_000  # rows embedded and written at a time: memory holds one block's vectors


def _write_embedded(
    store: LanceStore,
    name: str,
    n: int,
    block: Callable[[int, int], tuple[pa.Table, list[str]]],
    cached: CachedEmbedder,
    progress: Progress,
) -> None:
    """Replace table ``name`` with its ``n`` rows and their vectors, made a block at a time
    (``block(start, end)``: those rows without vectors, and their texts) while the table is
    written: one new version, and memory for one block's texts and vectors."""

    def embedded(start: int) -> list[pa.RecordBatch]:
        rows, texts = block(start, min(n, start + BLOCK_ROWS))
        (vectors,) = cached.embed_groups([texts], progress)  # cache-checked, length-sorted
        return _with_vectors(rows, vectors).to_batches()

    if n == 0:
        store.replace(name, _with_vectors(block(0, 0)[0], np.zeros((0, 1), np.float32)))
        return
    pending = [embedded(0)]  # made before the write starts: its errors surface as they are
    schema = pending[0][0].schema

    def stream() -> Iterator[pa.RecordBatch]:
        yield from pending.pop()  # not held once written
        for start in range(BLOCK_ROWS, n, BLOCK_ROWS):
            yield from embedded(start)

    store.replace_stream(name, schema, stream())


def _passage_block(chunks: Sequence[Passage]) -> Callable[[int, int], tuple[pa.Table, list[str]]]:
    return lambda s, e: (_passage_rows(chunks[s:e]), [p.full_text for p in chunks[s:e]])


def _node_block(name: str, rows: pa.Table) -> Callable[[int, int], tuple[pa.Table, list[str]]]:
    return lambda s, e: (rows.slice(s, e - s), _node_texts(name, rows.slice(s, e - s)))


def embed_index(
    store: LanceStore, embedder: Embedder, extractor_key: str, progress: Progress = no_progress
) -> EmbedReport:
    """Rebuild the passages, concepts, facts and rules tables with vectors from the embedding
    cache."""
    chunks = read_chunks(store)
    payloads = ExtractionJson(store, extractor_key, [p.id for p in chunks])  # read as parsed
    digest = ids.digest(
        embedder.name,
        extractor_key,
        json.dumps(
            [[p.id, p.doc_id, p.domain, p.id in payloads, p.time, p.ingested_at] for p in chunks]
        ),
    )
    outputs = (PASSAGES, CONCEPTS, FACTS, RULES)
    if store.stage_digest("embeddings") == digest and all(
        store.count(n) or n == RULES for n in outputs
    ):
        # same chunks, extractions and model as the tables were built from: nothing to read or write
        n = [store.count(name) for name in outputs]
        return EmbedReport(n[0], n[1], n[2], n[3], texts_embedded=0, cache_hits=0)
    cached = CachedEmbedder(embedder, LanceVectorCache(store))
    n_passages = len(chunks)
    # one model call path, a table at a time and a block of rows at a time (each block's texts
    # cache-checked and length-sorted together): memory holds one block's texts and vectors
    _write_embedded(store, PASSAGES, n_passages, _passage_block(chunks), cached, progress)
    progress("embed_tables", 1, 4)  # tables written so far (a crash here leaves the rest stale)
    keys = [ChunkKey(p.id, p.domain) for p in chunks]
    del chunks  # the texts: the node tables need each chunk's id and domain only
    merged = NodeTables(keys, payloads)  # each table built, written and dropped in turn
    counts = [n_passages]
    for done, (name, build) in enumerate(
        ((CONCEPTS, merged.concepts), (FACTS, merged.facts), (RULES, merged.rules)), 2
    ):
        rows = build()
        counts.append(rows.num_rows)
        _write_embedded(store, name, rows.num_rows, _node_block(name, rows), cached, progress)
        del rows
        give_back()  # what the last table freed, before the next one is built
        progress("embed_tables", done, 4)
    store.set_stage_digest("embeddings", digest)
    n_concepts, n_facts, n_rules = counts[1:]
    return EmbedReport(
        n_passages, n_concepts, n_facts, n_rules, cached.texts_embedded, cached.cache_hits
    )
