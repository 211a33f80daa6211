"""The embeddings and synonym-edges stages: passages, concepts, facts and rules tables with
vectors from the embedding cache, then synonym edges between close concepts.

Incremental: unchanged inputs (by digest) leave the tables as they are."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from qortex_core.embed import CachedEmbedder, Embedder
from qortex_core.ingest.chunk_stage import Progress, no_progress, read_chunks, read_extractions
from qortex_core.ingest.synonyms import SynonymConfig, synonym_pairs
from qortex_core.storage import ids
from qortex_core.storage.model import Passage, fact_text
from qortex_core.storage.store import (
    CONCEPTS,
    FACTS,
    PASSAGES,
    RULES,
    SYNONYMS,
    LanceStore,
    arrow_to_vectors,
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


def _with_vectors(columns: dict[str, list], vectors: np.ndarray) -> pa.Table:
    table = pa.table(columns)
    return (
        table.append_column("vector", vectors_to_arrow(vectors))
        if len(vectors)
        else table.append_column("vector", pa.array([], type=pa.list_(pa.float32(), 1)))
    )


def node_rows(chunks: Sequence[Passage], payloads: dict[str, dict]) -> tuple[dict, dict, dict]:
    """Concept, fact and rule rows by id, merged over every chunk's extraction payload."""
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
    return concepts, facts, rules


def embed_index(
    store: LanceStore, embedder: Embedder, extractor_key: str, progress: Progress = no_progress
) -> EmbedReport:
    """Rebuild the passages, concepts, facts and rules tables with vectors from the embedding
    cache."""
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
        n = [store.count(name) for name in outputs]
        return EmbedReport(n[0], n[1], n[2], n[3], texts_embedded=0, cache_hits=0)
    cached = CachedEmbedder(embedder, store.cached_vectors, store.save_vectors)
    concepts, facts, rules = node_rows(chunks, payloads)
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
