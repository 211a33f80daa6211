"""The snapshot graph's links, from the stored tables in snapshot order: fact, synonym,
containment and sequence edges as node indices, each fact's source passages, and the dangling
links a build finds on its way (:func:`dangling`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import SnapshotError
from qortex_core.ingest.graph import GraphConfig, distinct_keys, fact_endpoints
from qortex_core.ingest.sequence import sequence_pairs, sequence_weights
from qortex_core.ingest.snapshot_read import Links, Stored
from qortex_core.ingest.snapshot_tables import listed
from qortex_core.storage import id_keys


def _column(table: pa.Table, name: str) -> list:
    """``table[name]`` as a list; [] for an empty table (which may lack the column)."""
    return table[name].to_pylist() if table.num_rows else []


def _positions(values: pa.ChunkedArray | pa.Array, keys: pa.ChunkedArray, what: str) -> np.ndarray:
    """(n,) int64 row of each value in ``keys``.

    Raises:
        SnapshotError: a value is not among the keys (the tables disagree).
    """
    at = id_keys.index_in(values, keys)
    missing = int((at < 0).sum())
    if missing:
        raise SnapshotError(f"{missing} {what} name a concept or passage that is not stored")
    return at


def fact_edges(
    stored: Stored, graph_config: GraphConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(n_facts, 2) fact endpoints; one (subject, object) row per (fact, source passage);
    the per-row relation multipliers (None when no relation weight is set)."""
    facts, concept_ids = stored.facts, stored.concepts["id"] if stored.concepts.num_rows else None
    if facts.num_rows == 0 or concept_ids is None:
        return np.zeros((0, 2), np.int32), np.zeros((0, 2), np.int32), None
    ends = fact_endpoints(facts, concept_ids) if stored.fact_ends is None else stored.fact_ends
    if (ends < 0).any():
        unknown = int((ends < 0).any(axis=1).sum())
        raise SnapshotError(f"{unknown} facts name a concept or passage that is not stored")
    fact_nodes = ends.astype(np.int32, copy=False)  # (facts, 2)
    counts = pc.list_value_length(facts["passage_ids"]).to_numpy(zero_copy_only=False)
    fact_pairs = np.repeat(fact_nodes, counts, axis=0)  # (fact occurrences, 2)
    weighted = graph_config.relation_weights and "relation" in facts.schema.names
    fact_scale = (
        np.repeat(graph_config.relation_multipliers(_column(facts, "relation")), counts)
        if weighted
        else None
    )
    return fact_nodes, fact_pairs, fact_scale


def synonym_edges(stored: Stored) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, weight) of every synonym edge, as phrase indices."""
    syn = stored.synonyms
    if syn.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    keys = stored.concepts["id"]
    weights = np.asarray(syn["weight"].to_numpy(), np.float32)
    ends = pa.chunked_array(syn["a"].chunks + syn["b"].chunks)  # one lookup for both ends
    at = _positions(ends, keys, "synonyms")
    return at[: syn.num_rows], at[syn.num_rows :], weights


def dangling(stored: Stored) -> dict[str, int] | None:
    """The dangling edges of the tables this build read: a fact or synonym end that names no
    concept fails the build (:func:`_positions`), so only the concepts' passage links that
    name no stored passage are counted, as the lists were looked up (``stored.links``). None
    when there is no concept or passage."""
    if stored.concepts.num_rows == 0 or stored.passages.num_rows == 0 or stored.links is None:
        return None
    return {"fact": 0, "synonym": 0, "contains": stored.links.unknown}


def _listed_passages(
    table: pa.Table, passages: pa.Table, links: Links | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(row, passage index) pairs of ``table``'s ``passage_ids`` lists: stored passages only,
    each pair once, sorted by row then passage (``links``: those lists looked up already)."""
    if table.num_rows == 0 or passages.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if links is None:
        row, passage = listed(table["passage_ids"], passages["id"])  # (known listings,)
    else:
        row, passage = links.rows, links.passages
    key = distinct_keys(row * passages.num_rows + passage)  # (pairs,) rows in order: sorted runs
    return key // passages.num_rows, key % passages.num_rows


def contains(stored: Stored) -> np.ndarray:
    """(n_links, 2) (passage index, phrase index): each stored passage a concept lists, once."""
    phrase, passage = _listed_passages(stored.concepts, stored.passages, stored.links)
    return np.stack([passage, phrase], axis=1)


def fact_passages(stored: Stored) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr, indices) of the stored passages each fact came from, sorted per fact."""
    fact, passage = _listed_passages(stored.facts, stored.passages)
    indptr = np.zeros(stored.facts.num_rows + 1, np.int64)
    indptr[1:] = np.cumsum(np.bincount(fact, minlength=stored.facts.num_rows))
    return indptr, passage.astype(np.int32)


def sequence_edges(
    stored: Stored, graph_config: GraphConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, weight) passage-to-passage edges between neighbouring items of one dated source."""
    p = stored.passages
    # passages stored before event times were kept have no ``time`` column: no sequence then
    when = _column(p, "time") if "time" in p.schema.names else [None] * p.num_rows
    a, b, distance = sequence_pairs(
        _column(p, "doc_id"), when, _column(p, "domain"), graph_config.sequence
    )
    return a, b, sequence_weights(distance, graph_config.sequence)
