"""Index building: the stage functions that the Dagster assets and ``qortex eval`` both call.

chunks -> extractions -> embeddings (passages, concepts, facts, rules) -> synonym edges -> snapshot
Every stage is incremental by content hash.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from qortex_core.embed import CachedEmbedder, Embedder
from qortex_core.errors import QortexError
from qortex_core.ingest.extract import Extractor
from qortex_core.ingest.graph import (
    GraphConfig,
    GraphInput,
    build_adjacency,
    fact_passage_csr,
    phrase_passage_counts,
    phrase_text_frequency,
)
from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs
from qortex_core.storage import fulltext, ids, times
from qortex_core.storage import snapshot as snap
from qortex_core.storage.model import Extraction, Passage, fact_text
from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotCounts, SnapshotTables
from qortex_core.storage.store import (
    CHUNKS,
    CONCEPTS,
    EXTRACTIONS,
    FACTS,
    PASSAGES,
    RULES,
    SYNONYMS,
    LanceStore,
    arrow_to_vectors,
    vectors_to_arrow,
)

Progress = Callable[[str, int, int], None]


def _quiet(stage: str, done: int, total: int) -> None:
    return None


# -- chunks -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChunkReport:
    total: int
    added: int
    removed: int


def _chunk_table(passages: Sequence[Passage], ingested: dict[str, str | None]) -> pa.Table:
    """Chunk rows; ``ingested``: passage id -> its ingest time (ISO 8601 UTC)."""
    return pa.table(
        {
            "id": pa.array([p.id for p in passages], pa.string()),
            "doc_id": pa.array([p.doc_id for p in passages], pa.string()),
            "title": pa.array([p.title for p in passages], pa.string()),
            "text": pa.array([p.text for p in passages], pa.string()),
            "domain": pa.array([p.domain for p in passages], pa.string()),
            "time": pa.array([p.time for p in passages], pa.string()),
            "ingested_at": pa.array([ingested.get(p.id) for p in passages], pa.string()),
        }
    )


def _timed_chunks(store: LanceStore) -> pa.Table:
    """The chunks table, given empty ``time``/``ingested_at`` columns first if it predates them."""
    existing = store.read(CHUNKS)
    if existing.num_rows == 0 or "time" in existing.schema.names:
        return existing
    for name in ("time", "ingested_at"):  # unknown for chunks stored before times were kept
        existing = existing.append_column(name, pa.nulls(existing.num_rows, pa.string()))
    store.replace(CHUNKS, existing)
    return existing


def sync_chunks(store: LanceStore, passages: Sequence[Passage], prune: bool = True) -> ChunkReport:
    """Make the chunks table hold ``passages`` (by content id); drop others when ``prune``.

    A new chunk's ingest time is now (or the passage's own ``ingested_at``); a chunk that
    moved (same text, another document, domain or event time) keeps its ingest time.
    """
    unique = {p.id: p for p in passages}
    existing = _timed_chunks(store)
    have = set(existing["id"].to_pylist()) if existing.num_rows else set()
    columns = ["id", "doc_id", "domain", "time", "ingested_at"]
    placed = {r["id"]: r for r in existing.select(columns).to_pylist()} if have else {}
    new = [p for pid, p in unique.items() if pid not in have]
    moved = [
        p
        for pid, p in unique.items()
        if pid in placed
        and (placed[pid]["doc_id"], placed[pid]["domain"], placed[pid]["time"])
        != (p.doc_id, p.domain, p.time)
    ]  # same text, new home or time
    if new or moved:
        stamp = times.now_iso()
        ingested = {p.id: p.ingested_at or stamp for p in new}
        ingested |= {p.id: placed[p.id]["ingested_at"] for p in moved}
        store.upsert(CHUNKS, _chunk_table(new + moved, ingested))
    stale = sorted(have - set(unique)) if prune else []
    store.delete(CHUNKS, "id", stale)
    return ChunkReport(total=len(unique), added=len(new), removed=len(stale))


def read_chunks(store: LanceStore) -> list[Passage]:
    """All chunks, sorted by id."""
    rows = store.read(CHUNKS)
    if rows.num_rows == 0:
        return []
    out = [
        Passage(
            r["text"], r["title"], r["doc_id"], r["domain"], r.get("time"), r.get("ingested_at")
        )
        for r in rows.to_pylist()
    ]
    return sorted(out, key=lambda p: p.id)


# -- extraction ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtractReport:
    chunks: int
    extracted: int
    cached: int
    failed: int


def _payload(ex: Extraction) -> str:
    return json.dumps(
        {
            "concepts": [[c.name, c.description] for c in ex.concepts],
            "facts": [[f.subject, f.predicate, f.object, f.relation.value] for f in ex.facts],
            "rules": [[r.text, list(r.concepts), r.category, r.confidence] for r in ex.rules],
        },
        ensure_ascii=False,
    )


def extraction_key(passage_id: str, extractor_key: str) -> str:
    return ids.digest(passage_id, extractor_key)


def extract_chunks(
    store: LanceStore, extractor: Extractor, batch: int = 64, progress: Progress = _quiet
) -> ExtractReport:
    """Extract every chunk that has no successful extraction under this extractor's cache key."""
    chunks = read_chunks(store)
    key = extractor.cache_key
    done_rows = store.read(EXTRACTIONS)
    done: set[str] = set()
    if done_rows.num_rows:
        done = {
            k
            for k, s in zip(done_rows["key"].to_pylist(), done_rows["status"].to_pylist())
            if s == "ok"
        }
    todo = [p for p in chunks if extraction_key(p.id, key) not in done]
    failed = 0
    for start in range(0, len(todo), batch):
        part = todo[start : start + batch]
        results = extractor.extract(part)
        status = [ex.meta.get("status", "ok") for ex in results]
        failed += sum(s != "ok" for s in status)
        store.upsert(
            EXTRACTIONS,
            pa.table(
                {
                    "key": [extraction_key(p.id, key) for p in part],
                    "passage_id": [p.id for p in part],
                    "extractor": [key] * len(part),
                    "status": status,
                    "error": [str(ex.meta.get("error", "")) for ex in results],
                    "payload": [_payload(ex) for ex in results],
                }
            ),
            key="key",
        )
        progress("extract", min(start + batch, len(todo)), len(todo))
    return ExtractReport(
        chunks=len(chunks),
        extracted=len(todo) - failed,
        cached=len(chunks) - len(todo),
        failed=failed,
    )


def read_extractions(
    store: LanceStore, extractor_key: str, passage_ids: Sequence[str]
) -> dict[str, dict]:
    """Successful extraction payloads by passage id for this extractor."""
    rows = store.read_where(
        EXTRACTIONS, "key", [extraction_key(p, extractor_key) for p in passage_ids]
    )
    return {
        r["passage_id"]: json.loads(r["payload"]) for r in rows.to_pylist() if r["status"] == "ok"
    }


# -- embeddings ---------------------------------------------------------------------------
@dataclass(frozen=True)
class EmbedReport:
    passages: int
    concepts: int
    facts: int
    rules: int
    texts_embedded: int
    cache_hits: int


def _with_vectors(columns: dict[str, list], vectors: np.ndarray) -> pa.Table:
    table = pa.table(columns)
    return (
        table.append_column("vector", vectors_to_arrow(vectors))
        if len(vectors)
        else table.append_column("vector", pa.array([], type=pa.list_(pa.float32(), 1)))
    )


def embed_index(
    store: LanceStore, embedder: Embedder, extractor_key: str, progress: Progress = _quiet
) -> EmbedReport:
    """Rebuild the passages, concepts, facts and rules tables with vectors from the embedding cache."""
    chunks = read_chunks(store)
    payloads = read_extractions(store, extractor_key, [p.id for p in chunks])
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
        return EmbedReport(*(store.count(n) for n in outputs), texts_embedded=0, cache_hits=0)
    cached = CachedEmbedder(embedder, store.cached_vectors, store.save_vectors)
    concepts: dict[str, dict] = {}
    facts: dict[str, dict] = {}
    rules: dict[str, dict] = {}
    for p in chunks:
        payload = payloads.get(p.id, {})
        for name, description in payload.get("concepts", []):
            c = concepts.setdefault(
                ids.concept_id(name),
                {"name": name, "description": description, "passage_ids": [], "domains": []},
            )
            c["passage_ids"].append(p.id)
            if p.domain not in c["domains"]:
                c["domains"].append(p.domain)
        for s, pred, o, relation in payload.get("facts", []):
            f = facts.setdefault(
                ids.fact_id(s, pred, o),
                {
                    "subject": s,
                    "predicate": pred,
                    "object": o,
                    "relation": relation,
                    "subject_id": ids.concept_id(s),
                    "object_id": ids.concept_id(o),
                    "passage_ids": [],
                },
            )
            f["passage_ids"].append(p.id)
            for name in (s, o):  # every fact endpoint is a concept node
                c = concepts.setdefault(
                    ids.concept_id(name),
                    {"name": name, "description": "", "passage_ids": [], "domains": []},
                )
                if p.id not in c["passage_ids"]:
                    c["passage_ids"].append(p.id)
        for text, names, category, confidence in payload.get("rules", []):
            r = rules.setdefault(
                ids.rule_id(text),
                {
                    "text": text,
                    "concepts": [ids.concept_id(n) for n in names],
                    "category": category,
                    "confidence": float(confidence),
                    "passage_ids": [],
                },
            )
            r["passage_ids"].append(p.id)
    progress("embed", 0, 4)
    p_vec = cached.embed([p.full_text for p in chunks])
    store.replace(
        PASSAGES,
        _with_vectors(
            {
                "id": [p.id for p in chunks],
                "doc_id": [p.doc_id for p in chunks],
                "title": [p.title for p in chunks],
                "text": [p.text for p in chunks],
                "domain": [p.domain for p in chunks],
                "time": pa.array([p.time for p in chunks], pa.string()),
                "ingested_at": pa.array([p.ingested_at for p in chunks], pa.string()),
            },
            p_vec,
        ),
    )
    progress("embed", 1, 4)
    for name, rows, text_of in (
        (CONCEPTS, concepts, lambda r: r["name"]),
        (FACTS, facts, lambda r: fact_text(r["subject"], r["predicate"], r["object"])),
        (RULES, rules, lambda r: r["text"]),
    ):
        keys = sorted(rows)
        vectors = cached.embed([text_of(rows[k]) for k in keys])
        columns: dict[str, list] = {"id": keys}
        for field_name in next(iter(rows.values())).keys() if rows else []:
            columns[field_name] = [rows[k][field_name] for k in keys]
        store.replace(name, _with_vectors(columns, vectors))
        progress("embed", 2 + (name != CONCEPTS) + (name == RULES), 4)
    store.set_stage_digest("embeddings", digest)
    return EmbedReport(
        len(chunks), len(concepts), len(facts), len(rules), cached.texts_embedded, cached.cache_hits
    )


# -- synonyms -----------------------------------------------------------------------------
def build_synonyms(store: LanceStore, config: SynonymConfig = SynonymConfig()) -> int:
    """Replace the synonym edge table from concept vectors; returns the number of edges."""
    built_from = store.stage_digest("embeddings")  # fixes the concept table's names and vectors
    digest = ids.digest(json.dumps(asdict(config)), built_from or "")
    if built_from and store.stage_digest("synonyms") == digest and SYNONYMS in store.table_names():
        return store.count(
            SYNONYMS
        )  # same concepts, vectors and settings as last time: the edges stand
    concepts = store.read(CONCEPTS)
    if concepts.num_rows:
        dim = concepts.schema.field("vector").type.list_size
        r, c, w = synonym_pairs(
            arrow_to_vectors(concepts["vector"], dim), concepts["name"].to_pylist(), config
        )
        cid = np.array(concepts["id"].to_pylist(), dtype=object)
        a, b = cid[r].tolist(), cid[c].tolist()
    else:
        a, b, w = [], [], np.zeros(0, np.float32)
    store.replace(
        SYNONYMS,
        pa.table(
            {
                "a": pa.array(a, pa.string()),
                "b": pa.array(b, pa.string()),
                "weight": pa.array(np.asarray(w, np.float32)),
            }
        ),
    )
    store.set_stage_digest("synonyms", digest)
    return len(a)


# -- snapshot -----------------------------------------------------------------------------
def _vectors(table: pa.Table) -> np.ndarray:
    if table.num_rows == 0:
        return np.zeros((0, 1), np.float32)
    return arrow_to_vectors(table["vector"], table.schema.field("vector").type.list_size)


def _index_of(keys: list[str]) -> dict[str, int]:
    return {k: i for i, k in enumerate(keys)}


@dataclass(frozen=True)
class SnapshotReport:
    """A published snapshot: its name (``v000003-1a2b3c4d``), version, folder and counts."""

    name: str
    version: int
    path: Path
    counts: SnapshotCounts


_SNAPSHOT_INPUTS = (PASSAGES, CONCEPTS, FACTS, RULES, SYNONYMS, fulltext.PASSAGE_TEXT)


def _inputs_digest(
    versions: dict, embedding_model: str, graph_config: GraphConfig, params: dict | None
) -> str:
    """What a snapshot is built from: its input tables' versions, the model, weights, params."""
    used = {name: versions.get(name) for name in _SNAPSHOT_INPUTS}
    return ids.digest(
        json.dumps(used, sort_keys=True, default=str),
        embedding_model,
        json.dumps(asdict(graph_config), sort_keys=True, default=str),
        json.dumps(params or {}, sort_keys=True, default=str),
    )


def _latest_with_inputs(home: str | Path, inputs: str) -> SnapshotReport | None:
    """The latest snapshot when it was built from ``inputs``, else None."""
    try:
        latest = snap.load(home)  # verified: a damaged latest snapshot is rebuilt, not kept
    except QortexError:
        return None
    if latest.manifest.get("inputs_digest") != inputs or latest.path is None:
        return None
    path = Path(latest.path)
    return SnapshotReport(path.name, latest.version, path, SnapshotCounts.of(latest.manifest))


def build_snapshot(
    store: LanceStore,
    home: str | Path,
    embedding_model: str,
    graph_config: GraphConfig = GraphConfig(),
    params: dict | None = None,
    force: bool = False,
) -> SnapshotReport:
    """Assemble graph arrays from the stored tables and publish them as the new latest snapshot.

    When the latest snapshot was built from the same inputs (table versions, model, weights,
    parameters) nothing is published and its path is returned (an unchanged re-run adds
    nothing), unless ``force``.
    """
    versions = store.versions()
    passages = store.read(PASSAGES)
    # the passages' BM25 index, incremental; the snapshot pins its version (storage/fulltext.py)
    versions[fulltext.PASSAGE_TEXT] = fulltext.sync(store.db, passages)
    inputs = _inputs_digest(versions, embedding_model, graph_config, params)
    unchanged = None if force else _latest_with_inputs(home, inputs)
    if unchanged is not None:
        return unchanged
    concepts, facts = store.read(CONCEPTS), store.read(FACTS)
    rules, syn = store.read(RULES), store.read(SYNONYMS)
    c_ids = concepts["id"].to_pylist() if concepts.num_rows else []
    p_ids = passages["id"].to_pylist() if passages.num_rows else []
    c_at, p_at = _index_of(c_ids), _index_of(p_ids)
    n_phr = len(c_ids)
    fact_nodes = np.array(
        [
            [c_at[s], c_at[o]]
            for s, o in zip(
                facts["subject_id"].to_pylist() if facts.num_rows else [],
                facts["object_id"].to_pylist() if facts.num_rows else [],
            )
        ],
        dtype=np.int32,
    ).reshape(-1, 2)
    counts = [len(x) for x in facts["passage_ids"].to_pylist()] if facts.num_rows else []
    fact_pairs = np.repeat(fact_nodes, counts, axis=0) if len(counts) else fact_nodes
    relations = (
        facts["relation"].to_pylist() if facts.num_rows and "relation" in facts.schema.names else []
    )
    fact_scale = (
        np.repeat(graph_config.relation_multipliers(relations), counts)
        if graph_config.relation_weights and relations
        else None
    )
    contains = np.array(
        [
            [p_at[pid], i]
            for i, plist in enumerate(concepts["passage_ids"].to_pylist() if n_phr else [])
            for pid in set(plist)
            if pid in p_at
        ],
        dtype=np.int64,
    ).reshape(-1, 2)
    syn_rows = syn.to_pylist() if syn.num_rows else []
    synonyms = (
        np.array([c_at[r["a"]] for r in syn_rows], np.int64),
        np.array([c_at[r["b"]] for r in syn_rows], np.int64),
        np.array([r["weight"] for r in syn_rows], np.float32),
    )
    adj = build_adjacency(
        GraphInput(n_phr, len(p_ids), fact_pairs, contains, synonyms, fact_scale), graph_config
    )
    passage_count = phrase_passage_counts(contains, n_phr)
    fact_passage_indptr, fact_passage_indices = fact_passage_csr(
        facts["passage_ids"].to_pylist() if facts.num_rows else [], p_at
    )
    text_frequency = phrase_text_frequency(
        [f"{t} {x}" for t, x in zip(passages["title"].to_pylist(), passages["text"].to_pylist())]
        if p_ids
        else [],
        concepts["name"].to_pylist() if n_phr else [],
    )
    nodes = pa.table(
        {
            "id": c_ids + p_ids,
            "kind": ["phrase"] * n_phr + ["passage"] * len(p_ids),
            "name": (concepts["name"].to_pylist() if n_phr else [])
            + (passages["title"].to_pylist() if p_ids else []),
        }
    )
    arrays = SnapshotArrays(
        # int32 indptr where it fits: with int64 indptr scipy would copy int32 indices on load
        adj_indptr=adj.indptr.astype(np.int32 if adj.nnz < 2**31 else np.int64),
        adj_indices=adj.indices.astype(np.int32),
        adj_data=adj.data.astype(np.float32),
        passage_vectors=_vectors(passages),
        fact_vectors=_vectors(facts),
        fact_nodes=fact_nodes,
        phrase_vectors=_vectors(concepts),
        phrase_passage_count=passage_count,
        phrase_text_frequency=text_frequency,
        fact_passage_indptr=fact_passage_indptr,
        fact_passage_indices=fact_passage_indices,
        synonym_pairs=np.stack([synonyms[0], synonyms[1]], axis=1).astype(np.int32).reshape(-1, 2),
        synonym_weights=synonyms[2] * np.float32(graph_config.synonym_scale),
    )
    rule_rows = rules.to_pylist() if rules.num_rows else []
    p_domain = dict(
        zip(p_ids, passages["domain"].to_pylist() if p_ids else [])
    )  # rules are filtered by their passages' domains
    tables = SnapshotTables(
        nodes=nodes,
        passages=passages.drop_columns(["vector"])
        if p_ids
        else pa.table(
            {
                k: pa.array([], pa.string())
                for k in ("id", "doc_id", "title", "text", "domain", "time", "ingested_at")
            }
        ),
        facts=pa.table(
            {
                k: pa.array(facts[k].to_pylist() if facts.num_rows else [], pa.string())
                for k in ("id", "subject", "predicate", "object")
            }
        ),
        rules=pa.table(
            {
                "id": pa.array([r["id"] for r in rule_rows], pa.string()),
                "text": pa.array([r["text"] for r in rule_rows], pa.string()),
                "category": pa.array([r["category"] for r in rule_rows], pa.string()),
                "confidence": pa.array([r["confidence"] for r in rule_rows], pa.float32()),
                "concept_nodes": pa.array(
                    [[c_at[c] for c in r["concepts"] if c in c_at] for r in rule_rows],
                    pa.list_(pa.int32()),
                ),
                "domains": pa.array(
                    [
                        sorted({p_domain[p] for p in r["passage_ids"] if p in p_domain})
                        for r in rule_rows
                    ],
                    pa.list_(pa.string()),
                ),
            }
        ),
    )
    counts = SnapshotCounts(
        phrases=n_phr,
        passages=len(p_ids),
        facts=len(fact_nodes),
        rules=len(rule_rows),
        nodes=n_phr + len(p_ids),
        edges=int(adj.nnz // 2),
        synonym_edges=len(syn_rows),
        contains=len(contains),
    )
    manifest = {
        "counts": counts.as_dict(),
        "embedding_model": embedding_model,
        "table_versions": versions,
        "inputs_digest": inputs,
        "params": dict(params or {}, graph=asdict(graph_config)),
    }
    published = snap.Snapshot(arrays=arrays.as_dict(), tables=tables.as_dict(), manifest=manifest)
    path = snap.publish(home, published)
    return SnapshotReport(path.name, int(path.name[1:7]), path, counts)


# -- the stage sequence -------------------------------------------------------------------
@dataclass(frozen=True)
class IngestRun:
    """The inputs of one in-process run of the stages (the Dagster assets read theirs from
    resources and run config).

    Attributes:
        store: the LanceDB store of the data home.
        home: where snapshots are published.
        extractor: the extraction stage's extractor (its ``cache_key`` keys the extractions).
        embedder: the embedding stage's embedder (its ``name`` lands in the manifest).
        passages: the chunks to index (the chunks table is made to hold exactly these).
        progress: ``(stage, done, total)`` callback of the extraction and embedding stages.
        extract_batch: chunks per extractor call and per extractions upsert.
        graph_config: edge weights of the published graph.
        params: extra manifest parameters.
    """

    store: LanceStore
    home: str | Path
    extractor: Extractor
    embedder: Embedder
    passages: Sequence[Passage] = ()
    progress: Progress = _quiet
    extract_batch: int = 64
    graph_config: GraphConfig = GraphConfig()
    params: dict | None = None


@dataclass(frozen=True)
class Stage:
    """One ingestion stage: its name (the Dagster asset's name) and its library function.

    ``run`` is None for ``documents``: reading source files is the asset's own work
    (:func:`qortex_core.ingest.documents.load_documents`); in-process runs start from passages.
    """

    name: str
    run: Callable[[IngestRun], object] | None


def _run_chunks(run: IngestRun) -> ChunkReport:
    return sync_chunks(run.store, run.passages)


def _run_extractions(run: IngestRun) -> ExtractReport:
    return extract_chunks(run.store, run.extractor, run.extract_batch, run.progress)


def _run_embeddings(run: IngestRun) -> EmbedReport:
    return embed_index(run.store, run.embedder, run.extractor.cache_key, run.progress)


def _run_synonyms(run: IngestRun) -> int:
    return build_synonyms(run.store)


def _run_snapshot(run: IngestRun) -> SnapshotReport:
    params = dict(run.params or {}, extractor=run.extractor.cache_key)
    return build_snapshot(run.store, run.home, run.embedder.name, run.graph_config, params)


STAGES = (
    Stage("documents", None),
    Stage("chunks", _run_chunks),
    Stage("extractions", _run_extractions),
    Stage("embeddings", _run_embeddings),
    Stage("synonym_edges", _run_synonyms),
    Stage("graph_snapshot", _run_snapshot),
)
STAGE_NAMES = tuple(stage.name for stage in STAGES)


def upstream_of(name: str) -> str:
    """The stage before ``name`` (an asset's dependency).

    Raises:
        KeyError: ``name`` is the first stage or not a stage.
    """
    at = STAGE_NAMES.index(name)
    if at == 0:
        raise KeyError(f"{name} is the first stage")
    return STAGE_NAMES[at - 1]


def run_stages(
    run: IngestRun, after: Callable[[str, object], None] | None = None
) -> dict[str, object]:
    """Every library stage of :data:`STAGES` in order; their reports by stage name.

    Args:
        run: the inputs.
        after: called with (stage name, report) as each stage finishes (timings, tests).
    """
    reports: dict[str, object] = {}
    for stage in STAGES:
        if stage.run is None:
            continue
        reports[stage.name] = stage.run(run)
        if after is not None:
            after(stage.name, reports[stage.name])
    return reports


def build_index(
    store: LanceStore,
    home: str | Path,
    passages: Sequence[Passage],
    extractor: Extractor,
    embedder: Embedder,
) -> Path:
    """Every stage in order, without Dagster: chunks, extractions, embeddings, synonyms, snapshot.

    The chunks table is made to hold exactly ``passages``; returns the published snapshot's path.
    """
    reports = run_stages(IngestRun(store, home, extractor, embedder, passages))
    report = reports["graph_snapshot"]
    assert isinstance(report, SnapshotReport)
    return report.path
