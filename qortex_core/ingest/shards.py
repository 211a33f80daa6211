"""Sharded ingestion: chunking, extraction and embedding split by a content hash of the document
id, so that shards can run as separate steps (processes, machines) at once.

LanceDB takes one writer for updates and deletes on a table, so a shard never writes a shared
table: shard ``i`` of ``n`` reads the shared tables and writes only its own staging table
``staging_<stage>_<token>_<i>_of_<n>``, where ``token`` names the run (the Dagster run id). Then
one merge per stage, the only writer, folds every shard's rows into the shared table exactly as
the one-shard stage would have written them, and drops the stage's staging tables. A merge that
misses a shard of its own run raises :class:`ShardError` instead of merging part of the input.

Every document's chunks, extractions and vectors belong to the shard :func:`shard_of` its id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from qortex_core.embed import Embedder
from qortex_core.errors import QortexError
from qortex_core.ingest import row_changes
from qortex_core.ingest.chunk_stage import (
    EXTRACTIONS_KEYED,
    ChunkReport,
    ExtractReport,
    Progress,
    extract_chunks,
    no_progress,
    read_chunks,
    read_extraction_json,
    sync_chunks,
)
from qortex_core.ingest.embed_cache import CachedEmbedder, LanceVectorCache
from qortex_core.ingest.embed_stage import EmbedReport, embed_index
from qortex_core.ingest.extract import Extractor
from qortex_core.ingest.node_tables import node_tables
from qortex_core.storage import ids, key_index
from qortex_core.storage.model import Passage, fact_text
from qortex_core.storage.store import EXTRACTIONS, LanceStore, arrow_to_vectors, vectors_to_arrow

_TOKEN = re.compile(r"[0-9a-z]{1,32}")


class ShardError(QortexError):
    """A merge found a shard of its run missing (it did not run, or ran in another run)."""


@dataclass(frozen=True)
class Shard:
    """One shard of a sharded stage run.

    Attributes:
        index: which shard, ``0 <= index < count``.
        count: how many shards the documents are split into.
        token: names the run (lower-case letters and digits, e.g. a Dagster run id without
            dashes); a merge folds only the staging tables of its own token.
    """

    index: int
    count: int
    token: str

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ShardError(f"shard {self.index} is not one of 0..{self.count - 1}")
        if not _TOKEN.fullmatch(self.token):
            raise ShardError(f"shard token {self.token!r} is not 1-32 letters or digits")


def run_token(run_id: str) -> str:
    """A staging token from a run id (a UUID): its letters and digits, lower-case, 32 at most."""
    return re.sub(r"[^0-9a-z]", "", run_id.lower())[:32] or "run"


def shard_of(doc_id: str, count: int) -> int:
    """The shard of a document: a content hash of its id, modulo ``count``."""
    return int(ids.digest("shard", doc_id), 16) % count


def staging_table(stage: str, shard: Shard) -> str:
    """The staging table shard ``shard`` of ``stage`` writes (and nothing else writes)."""
    return f"staging_{stage}_{shard.token}_{shard.index}_of_{shard.count}"


def _mine(passages: Sequence[Passage], shard: Shard) -> list[Passage]:
    return [p for p in passages if shard_of(p.doc_id, shard.count) == shard.index]


def _collect(store: LanceStore, stage: str, count: int, token: str) -> list[pa.Table]:
    """Every shard's staged rows of this run, in shard order.

    Raises:
        ShardError: a shard's staging table is missing.
    """
    names = set(store.table_names())
    wanted = [staging_table(stage, Shard(i, count, token)) for i in range(count)]
    missing = [i for i, name in enumerate(wanted) if name not in names]
    if missing:
        raise ShardError(
            f"{stage}: shard(s) {', '.join(map(str, missing))} of {count} did not run in this run; "
            f"materialize the {stage} shards together with {stage}"
        )
    return [store.read(name) for name in wanted]


def drop_staging(store: LanceStore, stage: str = "") -> list[str]:
    """Drop every staging table of ``stage`` (this run's and any a failed run left; every
    stage's when ``stage`` is empty); returns their names."""
    prefix = f"staging_{stage}_" if stage else "staging_"
    names = [name for name in store.table_names() if name.startswith(prefix)]
    for name in names:
        store.drop(name)
    return names


# -- chunks -------------------------------------------------------------------------------
_CHUNK_COLUMNS = ("text", "title", "doc_id", "domain", "time", "ingested_at")


def stage_chunks(store: LanceStore, passages: Sequence[Passage], shard: Shard) -> int:
    """Stage this shard's passages (those of its documents); returns how many."""
    mine = _mine(passages, shard)
    rows = {c: pa.array([getattr(p, c) for p in mine], pa.string()) for c in _CHUNK_COLUMNS}
    store.replace(staging_table("chunks", shard), pa.table(rows))
    return len(mine)


def merge_chunks(
    store: LanceStore, count: int, token: str, hidden: frozenset[str] = frozenset()
) -> tuple[ChunkReport, list[Passage]]:
    """Make the chunks table hold every shard's staged passages (less ``hidden`` ids).

    Returns:
        the report of :func:`sync_chunks` and the passages, in shard order.
    """
    passages = [
        Passage(**row)
        for table in _collect(store, "chunks", count, token)
        for row in table.select(list(_CHUNK_COLUMNS)).to_pylist()
    ]
    passages = [p for p in passages if p.id not in hidden]
    report = sync_chunks(store, passages)
    drop_staging(store, "chunks")
    return report, passages


# -- extractions --------------------------------------------------------------------------
def stage_extractions(
    store: LanceStore,
    extractor: Extractor,
    shard: Shard,
    batch: int = 64,
    progress: Progress = no_progress,
) -> ExtractReport:
    """Extract this shard's chunks that have no successful extraction; stage the rows.

    The rows go to the shard's staging table (the shared ``extractions`` table is only read).
    """
    staging = staging_table("extractions", shard)
    store.replace(staging, _EMPTY_EXTRACTIONS)  # an empty stage still says "this shard ran"
    mine = {p.id for p in _mine(read_chunks(store), shard)}
    return extract_chunks(store, extractor, batch, progress, only=mine, into=staging)


_EMPTY_EXTRACTIONS = pa.table(
    {
        name: pa.array([], pa.string())
        for name in ("key", "passage_id", "extractor", "status", "error", "payload")
    }
)


def merge_extractions(store: LanceStore, count: int, token: str) -> ExtractReport:
    """Fold every shard's staged extractions into the ``extractions`` table.

    Returns:
        the report the one-shard stage would give: every chunk, the staged rows as extracted
        or failed, the rest as cached.
    """
    staged = [t for t in _collect(store, "extractions", count, token) if t.num_rows]
    rows = pa.concat_tables(staged) if staged else _EMPTY_EXTRACTIONS
    before = row_changes.version(store, EXTRACTIONS)
    store.upsert(EXTRACTIONS, rows, key="key")
    failed = sum(s != "ok" for s in rows["status"].to_pylist())
    drop_staging(store, "extractions")
    key_index.keep_tables(store, EXTRACTIONS_KEYED)
    row_changes.record_since(store, EXTRACTIONS, before, rows["passage_id"].to_pylist(), [])
    chunks = len(read_chunks(store))
    return ExtractReport(
        chunks=chunks,
        extracted=rows.num_rows - failed,
        cached=chunks - rows.num_rows,
        failed=failed,
    )


# -- embeddings ---------------------------------------------------------------------------
def _texts(chunks: Sequence[Passage], payloads: Mapping[str, str]) -> list[str]:
    """Every text :func:`embed_index` embeds for these chunks: passages, concepts, facts, rules."""
    concepts, facts, rules = node_tables(chunks, payloads)
    texts = [p.full_text for p in chunks]
    if concepts.num_rows:
        texts += concepts["name"].to_pylist()
    if facts.num_rows:
        parts = (facts[c].to_pylist() for c in ("subject", "predicate", "object"))
        texts += [fact_text(*t) for t in zip(*parts)]
    if rules.num_rows:
        texts += rules["text"].to_pylist()
    return texts


class _StagingCache:
    """The shared embedding cache for lookups; the vectors a shard adds are kept for its
    staging table instead of being written to the shared one."""

    def __init__(self, store: LanceStore) -> None:
        self.shared = LanceVectorCache(store)
        self.keys: list[str] = []
        self.vectors: list[np.ndarray] = []

    def find(self, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return self.shared.find(keys)

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        self.keys += list(keys)
        self.vectors.append(vectors)  # (n, d)


def stage_embeddings(
    store: LanceStore, embedder: Embedder, extractor_key: str, shard: Shard
) -> tuple[int, int]:
    """Embed this shard's texts that the embedding cache lacks; stage the new vectors.

    Returns:
        (texts embedded, cache hits).
    """
    chunks = _mine(read_chunks(store), shard)
    payloads = read_extraction_json(store, extractor_key, [p.id for p in chunks])
    staging = _StagingCache(store)
    cached = CachedEmbedder(embedder, staging)
    cached.embed_groups([_texts(chunks, payloads)])
    matrix = (
        np.concatenate(staging.vectors) if staging.vectors else np.zeros((0, cached.dim))
    ).astype(np.float32)  # (n, d)
    keys = pa.array(staging.keys, pa.string())
    store.replace(
        staging_table("embeddings", shard),
        pa.table({"key": keys, "vector": vectors_to_arrow(matrix)}),
    )
    return cached.texts_embedded, cached.cache_hits


def merge_embeddings(
    store: LanceStore,
    embedder: Embedder,
    extractor_key: str,
    count: int,
    token: str,
    progress: Progress = no_progress,
) -> EmbedReport:
    """Fold the shards' staged vectors into the embedding cache, then build the passages,
    concepts, facts and rules tables as :func:`embed_index` does (from the cache).

    Returns:
        :func:`embed_index`'s report, counting the shards' new vectors as embedded.
    """
    vectors: dict[str, np.ndarray] = {}  # a text in several shards was embedded by each
    for table in _collect(store, "embeddings", count, token):
        if table.num_rows:
            dim = table.schema.field("vector").type.list_size
            vectors.update(zip(table["key"].to_pylist(), arrow_to_vectors(table["vector"], dim)))
    cache = LanceVectorCache(store)
    hit = cache.contains(list(vectors))  # (n,) bool: none, unless a run stopped after this write
    new = [k for k, h in zip(vectors, hit) if not h]
    if new:
        cache.add(new, np.stack([vectors[k] for k in new]))  # (new, d)
    drop_staging(store, "embeddings")
    report = embed_index(store, embedder, extractor_key, progress)
    return replace(  # the mode, reason and row counts as embed_index reports them
        report,
        texts_embedded=report.texts_embedded + len(vectors),
        cache_hits=max(report.cache_hits - len(vectors), 0),
    )
