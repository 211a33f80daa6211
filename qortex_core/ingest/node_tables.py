"""The concepts, facts and rules tables of the embedding stage, built column-wise.

The extraction payloads are flattened once into plain columns (one entry per occurrence), ids
are hashed once per distinct name, fact or rule text, and every merge is a numpy sort and
group: no Python object per concept, fact or rule. The tables equal what a row-by-row merge
over the chunks (sorted by id) gives:

- a node's fields come from its first occurrence (chunk order; in a chunk: concepts, then fact
  endpoints subject before object, then rules);
- a concept's ``passage_ids`` hold a chunk once per listing in that chunk's concepts, or once
  if only a fact names it there; its ``domains`` are the distinct domains of the chunks that
  list it, in first-seen order (fact endpoints add none);
- a fact's or rule's ``passage_ids`` hold a chunk once per occurrence.

Rows are sorted by id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.storage import ids
from qortex_core.storage.model import Passage

_STR_LIST = pa.list_(pa.string())


@dataclass
class _Flat:
    """Every occurrence in the payloads, one entry per column (chunk index in ``*_at``)."""

    c_at: list[int] = field(default_factory=list)
    c_name: list[str] = field(default_factory=list)
    c_desc: list[str] = field(default_factory=list)
    f_at: list[int] = field(default_factory=list)
    f_parts: list[tuple[str, str, str, str]] = field(default_factory=list)
    r_at: list[int] = field(default_factory=list)
    r_rows: list[tuple[str, list[str], str, float]] = field(default_factory=list)


def _flatten(chunks: Sequence[Passage], payloads: Mapping[str, dict | str]) -> _Flat:
    flat = _Flat()
    for at, p in enumerate(chunks):
        payload = payloads.get(p.id)
        if isinstance(payload, str):  # JSON text: parsed one chunk at a time
            payload = json.loads(payload)
        if not payload:
            continue
        for name, description in payload.get("concepts", []):
            flat.c_at.append(at)
            flat.c_name.append(name)
            flat.c_desc.append(description)
        for s, pred, o, relation in payload.get("facts", []):
            flat.f_at.append(at)
            flat.f_parts.append((s, pred, o, relation))
        for text, names, category, confidence in payload.get("rules", []):
            flat.r_at.append(at)
            flat.r_rows.append((text, names, category, float(confidence)))
    return flat


def _hashed(values: Sequence, hash_of: Callable) -> list[str]:
    """``hash_of(v)`` for every value, computed once per distinct value."""
    memo = {v: hash_of(v) for v in dict.fromkeys(values)}
    return [memo[v] for v in values]


def _concept_id(name: str) -> str:
    return ids.concept_id(name)


@dataclass(frozen=True)
class _Groups:
    """Occurrences grouped by id: ``order`` sorts them by (id, occurrence); group g spans
    ``order[start[g]:start[g + 1]]``; ``keys`` are the sorted distinct ids."""

    keys: pa.Array
    code: np.ndarray
    order: np.ndarray
    start: np.ndarray

    @classmethod
    def of(cls, id_values: Sequence[str]) -> "_Groups":
        encoded = pc.dictionary_encode(pa.array(id_values, pa.string()))
        dictionary = encoded.dictionary
        by_id = pc.sort_indices(dictionary).to_numpy().astype(np.int64)  # (groups,) id order
        rank = np.empty_like(by_id)
        rank[by_id] = np.arange(len(by_id))
        code = rank[encoded.indices.to_numpy(zero_copy_only=False)]  # (occurrences,)
        order = np.argsort(code, kind="stable")  # by id, then occurrence order
        start = np.searchsorted(code[order], np.arange(len(by_id) + 1))  # (groups+1,)
        return cls(dictionary.take(pa.array(by_id)), code, order, start)

    def first(self) -> np.ndarray:
        """(groups,) occurrence index of each group's first occurrence."""
        return self.order[self.start[:-1]]


def _lists(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=_STR_LIST)


def _take(values: Sequence, at: np.ndarray, kind: pa.DataType = pa.string()) -> pa.Array:
    return pa.array(values, kind).take(pa.array(at))


def _concept_passages(g: _Groups, at: np.ndarray, listed: np.ndarray, n_chunks: int) -> tuple:
    """(offsets, chunk indices): a chunk once per listing, or once if only a fact names it."""
    key = g.code[g.order].astype(np.int64) * n_chunks + at[g.order]  # (occ,) sorted by id, chunk
    first = np.flatnonzero(np.diff(key, prepend=-1) != 0)  # (pairs,) first of each run
    n_listed = np.add.reduceat(listed[g.order].astype(np.int64), first) if len(first) else first
    reps = np.where(n_listed > 0, n_listed, 1)  # (pairs,)
    pair_group = g.code[g.order][first]
    offsets = np.zeros(len(g.start), np.int64)
    np.add.at(offsets, pair_group + 1, reps)
    return np.cumsum(offsets), np.repeat(at[g.order][first], reps)


def _concept_domains(g: _Groups, at: np.ndarray, listed: np.ndarray, domains: list[str]) -> tuple:
    """(offsets, domain strings): distinct domains of the listing chunks, first-seen order."""
    dom = pc.dictionary_encode(pa.array(domains, pa.string()))
    d_code = dom.indices.to_numpy(zero_copy_only=False).astype(np.int64)[at]  # (occ,)
    sorted_occ = g.order[listed[g.order]]  # listing occurrences by id, then occurrence
    key = g.code[sorted_occ].astype(np.int64) * (len(dom.dictionary) + 1) + d_code[sorted_occ]
    _, first = np.unique(key, return_index=True)
    keep = sorted_occ[np.sort(first)]  # (pairs,) by id, then first seen
    offsets = np.zeros(len(g.start), np.int64)
    np.add.at(offsets, g.code[keep] + 1, 1)
    return np.cumsum(offsets), dom.dictionary.take(pa.array(d_code[keep]))


def _concepts(flat: _Flat, chunks: Sequence[Passage]) -> pa.Table:
    ends = [name for s, _, o, _ in flat.f_parts for name in (s, o)]
    names = flat.c_name + ends
    at = np.array(flat.c_at + [a for a in flat.f_at for _ in (0, 1)], np.int64)  # (occ,)
    listed = np.r_[np.ones(len(flat.c_name), bool), np.zeros(len(ends), bool)]
    seq = np.argsort(at, kind="stable")  # occurrence order: chunk, then listings, then ends
    names = [names[i] for i in seq]
    at, listed = at[seq], listed[seq]
    all_descs = flat.c_desc + [""] * len(ends)
    descs = [all_descs[i] for i in seq]
    g = _Groups.of(_hashed(names, _concept_id))
    first = g.first()
    p_off, p_at = _concept_passages(g, at, listed, len(chunks))
    d_off, d_val = _concept_domains(g, at, listed, [p.domain for p in chunks])
    chunk_ids = pa.array([p.id for p in chunks], pa.string())
    return pa.table(
        {
            "id": g.keys,
            "name": _take(names, first),
            "description": _take(descs, first),
            "passage_ids": _lists(p_off, chunk_ids.take(pa.array(p_at))),
            "domains": _lists(d_off, d_val),
        }
    )


def _occurrence_lists(g: _Groups, at: np.ndarray, chunks: Sequence[Passage]) -> pa.Array:
    """Each group's chunk ids, one per occurrence, in occurrence order."""
    chunk_ids = pa.array([p.id for p in chunks], pa.string())
    return _lists(g.start, chunk_ids.take(pa.array(at[g.order])))


def _fact_ids(parts: list[tuple[str, str, str, str]]) -> list[str]:
    """:func:`ids.fact_id` of every fact, each distinct string normalised once."""
    norm = {t: ids.normalize_phrase(t) for p in parts for t in dict.fromkeys(p[:3])}
    return _hashed(
        [(norm[s], norm[pred], norm[o]) for s, pred, o, _ in parts],
        lambda t: ids.fact_id_normalized(*t),
    )


def _facts(flat: _Flat, chunks: Sequence[Passage]) -> pa.Table:
    parts = flat.f_parts
    g = _Groups.of(_fact_ids(parts))
    first = g.first()
    subjects, objects = [p[0] for p in parts], [p[2] for p in parts]
    return pa.table(
        {
            "id": g.keys,
            "subject": _take(subjects, first),
            "predicate": _take([p[1] for p in parts], first),
            "object": _take(objects, first),
            "relation": _take([p[3] for p in parts], first),
            "subject_id": pa.array(_hashed([subjects[i] for i in first], _concept_id), pa.string()),
            "object_id": pa.array(_hashed([objects[i] for i in first], _concept_id), pa.string()),
            "passage_ids": _occurrence_lists(g, np.array(flat.f_at, np.int64), chunks),
        }
    )


def _rules(flat: _Flat, chunks: Sequence[Passage]) -> pa.Table:
    rows = flat.r_rows
    g = _Groups.of(_hashed([r[0] for r in rows], ids.rule_id))
    first = g.first().tolist()
    return pa.table(
        {
            "id": g.keys,
            "text": pa.array([rows[i][0] for i in first], pa.string()),
            "concepts": pa.array([_hashed(rows[i][1], _concept_id) for i in first], _STR_LIST),
            "category": pa.array([rows[i][2] for i in first], pa.string()),
            "confidence": pa.array([rows[i][3] for i in first], pa.float64()),
            "passage_ids": _occurrence_lists(g, np.array(flat.r_at, np.int64), chunks),
        }
    )


def node_tables(
    chunks: Sequence[Passage], payloads: Mapping[str, dict | str]
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The concepts, facts and rules tables (no vectors) merged over the chunks' payloads.

    Args:
        chunks: the chunks, sorted by id (the merge order).
        payloads: extraction payloads (parsed, or their JSON text) by chunk id; chunks
            without one add nothing.

    Returns:
        concepts (id, name, description, passage_ids, domains), facts (id, subject, predicate,
        object, relation, subject_id, object_id, passage_ids) and rules (id, text, concepts,
        category, confidence, passage_ids), each sorted by id.
    """
    flat = _flatten(chunks, payloads)
    return _concepts(flat, chunks), _facts(flat, chunks), _rules(flat, chunks)
