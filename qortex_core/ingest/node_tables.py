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
from dataclasses import dataclass, replace
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.allocators import give_back
from qortex_core.storage import ids

_STR_LIST = pa.list_(pa.string())


class Chunk(Protocol):
    """What the merge reads of a chunk (a :class:`~qortex_core.storage.model.Passage` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def domain(self) -> str: ...


class ChunkKey(NamedTuple):
    """A chunk's id and domain without its text (the stage drops the texts before merging)."""

    id: str
    domain: str


_FLUSH = 20_000  # chunks whose occurrences are gathered as Python values before going columnar
_STRING_COLUMNS = ("c_name", "c_desc", "f_s", "f_p", "f_o", "f_rel")


@dataclass
class _Flat:
    """Every occurrence in the payloads as columns: chunk index in ``*_at``; concept listings
    (``c_*``) and fact occurrences (``f_*``) as Arrow strings, not a Python object each; rules
    (few) as rows."""

    c_at: np.ndarray
    c_name: pa.Array
    c_desc: pa.Array
    f_at: np.ndarray
    f_s: pa.Array
    f_p: pa.Array
    f_o: pa.Array
    f_rel: pa.Array
    r_at: list[int]
    r_rows: list[tuple[str, list[str], str, float]]


class _Gather:
    """Occurrences gathered a few chunks at a time, then flushed into Arrow parts."""

    def __init__(self) -> None:
        self.values: dict[str, list] = {n: [] for n in ("c_at", "f_at", *_STRING_COLUMNS)}
        self.parts: dict[str, list] = {n: [] for n in self.values}

    def flush(self) -> None:
        for name, values in self.values.items():
            kind = pa.int64() if name.endswith("_at") else pa.string()
            self.parts[name].append(pa.array(values, kind))
            self.values[name] = []

    def column(self, name: str) -> pa.Array:
        """Every gathered value of ``name`` (call after the last :meth:`flush`)."""
        out = pa.concat_arrays(self.parts[name])
        self.parts[name] = []
        return out


def _flatten(chunks: Sequence[Chunk], payloads: Mapping[str, dict | str]) -> _Flat:
    gather, r_at, r_rows = _Gather(), [], []
    v = gather.values
    for at, p in enumerate(chunks):
        if at % _FLUSH == _FLUSH - 1:
            gather.flush()
        payload = payloads.get(p.id)
        if isinstance(payload, str):  # JSON text: parsed one chunk at a time
            payload = json.loads(payload)
        if not payload:
            continue
        for name, description in payload.get("concepts", []):
            v["c_at"].append(at)
            v["c_name"].append(name)
            v["c_desc"].append(description)
        for s, pred, o, relation in payload.get("facts", []):
            v["f_at"].append(at)
            v["f_s"].append(s)
            v["f_p"].append(pred)
            v["f_o"].append(o)
            v["f_rel"].append(relation)
        for text, names, category, confidence in payload.get("rules", []):
            r_at.append(at)
            r_rows.append((text, names, category, float(confidence)))
    gather.flush()
    ats = {n: gather.column(n).to_numpy(zero_copy_only=False) for n in ("c_at", "f_at")}
    strings = {n: gather.column(n) for n in _STRING_COLUMNS}
    return _Flat(**ats, **strings, r_at=r_at, r_rows=r_rows)


def _hashed(values: Sequence, hash_of: Callable) -> list[str]:
    """``hash_of(v)`` for every value, computed once per distinct value."""
    memo = {v: hash_of(v) for v in dict.fromkeys(values)}
    return [memo[v] for v in values]


_SLICE = 1 << 20  # strings turned into Python objects at a time


def _mapped(values: pa.Array, fn: Callable[[str], str]) -> pa.Array:
    """``fn`` of every string, a slice at a time: Python strings for one slice only."""
    parts = [
        pa.array([fn(v) for v in values.slice(s, _SLICE).to_pylist()], pa.string())
        for s in range(0, len(values), _SLICE)
    ]
    return pa.concat_arrays(parts) if parts else pa.array([], pa.string())


def _hashed_codes(values: pa.Array, hash_of: Callable[[str], str]) -> tuple[pa.Array, np.ndarray]:
    """``hash_of`` of each distinct string (computed once each; two strings may hash alike),
    and each value's row in it: the hashes without a string per value."""
    encoded = pc.dictionary_encode(values)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return _mapped(encoded.dictionary, hash_of), codes


def _hashed_strings(values: pa.Array, hash_of: Callable[[str], str]) -> pa.Array:
    """``hash_of(v)`` for every string, computed once per distinct string."""
    hashed, codes = _hashed_codes(values, hash_of)
    return hashed.take(pa.array(codes))


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
    def of(cls, id_values: Sequence[str] | pa.Array) -> "_Groups":
        values = id_values if isinstance(id_values, pa.Array) else pa.array(id_values, pa.string())
        encoded = pc.dictionary_encode(values)
        return cls.coded(encoded.dictionary, encoded.indices.to_numpy(zero_copy_only=False))

    @classmethod
    def coded(cls, ids_: pa.Array, at: np.ndarray) -> "_Groups":
        """Occurrence i has id ``ids_[at[i]]`` (``ids_`` may repeat an id)."""
        encoded = pc.dictionary_encode(ids_)
        dictionary = encoded.dictionary
        by_id = pc.sort_indices(dictionary).to_numpy().astype(np.int64)  # (groups,) id order
        rank = np.empty_like(by_id)
        rank[by_id] = np.arange(len(by_id))
        code = rank[encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)[at]]  # (occ,)
        order = np.argsort(code, kind="stable")  # by id, then occurrence order
        start = np.searchsorted(code[order], np.arange(len(by_id) + 1))  # (groups+1,)
        return cls(dictionary.take(pa.array(by_id)), code, order, start)

    def first(self) -> np.ndarray:
        """(groups,) occurrence index of each group's first occurrence."""
        return self.order[self.start[:-1]]


def _lists(offsets: np.ndarray, values: pa.Array) -> pa.Array:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values, type=_STR_LIST)


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


def _listed(g: _Groups, at: np.ndarray, listed: np.ndarray, n_chunks: int) -> pa.Array:
    """(chunks,) each chunk's listed concept ids, one per listing, in listing order."""
    occ = np.flatnonzero(listed)  # listing occurrences, in chunk order
    offsets = np.zeros(n_chunks + 1, np.int64)
    offsets[1:] = np.cumsum(np.bincount(at[occ], minlength=n_chunks))
    return _lists(offsets, g.keys.take(pa.array(g.code[occ])))


def _concepts(flat: _Flat, chunks: Sequence[Chunk]) -> tuple[pa.Table, pa.Array]:
    n_c, n_f = len(flat.c_at), len(flat.f_at)
    # occurrences: listings, then per fact occurrence its subject and object; src: each one's
    # row in the listing names followed by the subjects and then the objects
    src = np.empty(n_c + 2 * n_f, np.int64)  # (occ,)
    src[:n_c] = np.arange(n_c)
    src[n_c::2], src[n_c + 1 :: 2] = n_c + np.arange(n_f), n_c + n_f + np.arange(n_f)
    at = np.r_[flat.c_at, np.repeat(flat.f_at, 2)].astype(np.int64)  # (occ,)
    seq = np.argsort(at, kind="stable")  # occurrence order: chunk, then listings, then ends
    src, at, listed = src[seq], at[seq], src[seq] < n_c
    del seq
    names = pa.concat_arrays([flat.c_name, flat.f_s, flat.f_o]).take(pa.array(src))  # (occ,)
    g = _Groups.coded(*_hashed_codes(names, _concept_id))
    first_at = g.first()  # (concepts,) occurrence of each concept's first mention
    first_src = src[first_at]
    named = first_src < n_c  # its description comes from a listing, else it is empty
    described = flat.c_desc.take(pa.array(np.where(named, first_src, 0))) if n_c else None
    p_off, p_at = _concept_passages(g, at, listed, len(chunks))
    d_off, d_val = _concept_domains(g, at, listed, [p.domain for p in chunks])
    chunk_ids = pa.array([p.id for p in chunks], pa.string())
    table = pa.table(
        {
            "id": g.keys,
            "name": names.take(pa.array(first_at)),
            "description": pc.if_else(pa.array(named), described, "")
            if described is not None
            else pa.repeat(pa.scalar(""), len(first_at)),
            "passage_ids": _lists(p_off, chunk_ids.take(pa.array(p_at))),
            "domains": _lists(d_off, d_val),
        }
    )
    return table, _listed(g, at, listed, len(chunks))


def _occurrence_lists(g: _Groups, at: np.ndarray, chunks: Sequence[Chunk]) -> pa.Array:
    """Each group's chunk ids, one per occurrence, in occurrence order."""
    chunk_ids = pa.array([p.id for p in chunks], pa.string())
    return _lists(g.start, chunk_ids.take(pa.array(at[g.order])))


def _fact_ids(flat: _Flat) -> tuple[pa.Array, np.ndarray]:
    """:func:`ids.fact_id` of each distinct (subject, predicate, object), and each fact
    occurrence's row in it; each distinct string normalised once."""
    codes, norms = [], []
    for column in (flat.f_s, flat.f_p, flat.f_o):
        encoded = pc.dictionary_encode(column)
        codes.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        norms.append(_mapped(encoded.dictionary, ids.normalize_phrase))
    n_p, n_o = max(len(norms[1]), 1), max(len(norms[2]), 1)
    pairs, pair_at = np.unique(codes[0] * n_p + codes[1], return_inverse=True)  # (s, p)
    triples, triple_at = np.unique(pair_at.reshape(-1) * n_o + codes[2], return_inverse=True)
    sp = pairs[triples // n_o]  # (distinct triples,)
    at = (sp // n_p, sp % n_p, triples % n_o)  # (distinct triples,) each part's dictionary row
    parts = []
    for s in range(0, len(triples), _SLICE):  # Python strings for one slice of triples only
        texts = [norm.take(pa.array(a[s : s + _SLICE])).to_pylist() for norm, a in zip(norms, at)]
        parts.append(pa.array([ids.fact_id_normalized(*t) for t in zip(*texts)], pa.string()))
    hashed = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
    return hashed, triple_at.reshape(-1)


def _facts(flat: _Flat, chunks: Sequence[Chunk]) -> pa.Table:
    g = _Groups.coded(*_fact_ids(flat))
    first = pa.array(g.first())
    subjects, objects = flat.f_s.take(first), flat.f_o.take(first)
    return pa.table(
        {
            "id": g.keys,
            "subject": subjects,
            "predicate": flat.f_p.take(first),
            "object": objects,
            "relation": flat.f_rel.take(first),
            "subject_id": _hashed_strings(subjects, _concept_id),
            "object_id": _hashed_strings(objects, _concept_id),
            "passage_ids": _occurrence_lists(g, flat.f_at.astype(np.int64), chunks),
        }
    )


def _rules(flat: _Flat, chunks: Sequence[Chunk]) -> pa.Table:
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


class NodeTables:
    """The payloads flattened once; each table merged when asked for, so a caller can build,
    write and drop one table before the next is built (the embedding stage does). Each
    method is called once, concepts first: it releases the occurrence columns only it reads.

    Args:
        chunks: the chunks, sorted by id (the merge order).
        payloads: extraction payloads (parsed, or their JSON text) by chunk id; chunks
            without one add nothing.
    """

    def __init__(self, chunks: Sequence[Chunk], payloads: Mapping[str, dict | str]) -> None:
        self.chunks = chunks
        self.listed: pa.Array | None = None
        self.flat = _flatten(chunks, payloads)
        give_back()  # the parsed payloads' garbage, before the merges allocate

    def concepts(self) -> pa.Table:
        """id, name, description, passage_ids, domains; sorted by id. Sets :attr:`listed`:
        each chunk's listed concept ids (one per listing)."""
        out, self.listed = _concepts(self.flat, self.chunks)
        empty = pa.array([], pa.string())
        self.flat = replace(self.flat, c_at=np.zeros(0, np.int64), c_name=empty, c_desc=empty)
        give_back()
        return out

    def facts(self) -> pa.Table:
        """id, subject, predicate, object, relation, subject_id, object_id, passage_ids."""
        out = _facts(self.flat, self.chunks)
        give_back()
        return out

    def rules(self) -> pa.Table:
        """id, text, concepts, category, confidence, passage_ids; sorted by id."""
        return _rules(self.flat, self.chunks)


def node_tables(
    chunks: Sequence[Chunk], payloads: Mapping[str, dict | str]
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The concepts, facts and rules tables (no vectors) merged over the chunks' payloads
    (:class:`NodeTables`, every table at once), each sorted by id."""
    merged = NodeTables(chunks, payloads)
    return merged.concepts(), merged.facts(), merged.rules()
