"""What a graph snapshot holds: one typed definition for the writer and every reader.

:func:`qortex_core.ingest.stages.build_snapshot` fills :class:`SnapshotArrays`,
:class:`SnapshotTables` and :class:`SnapshotCounts` and publishes them;
:class:`~qortex_core.query.snapshot_view.SnapshotView` and the PPR memory probe read them
back with :meth:`SnapshotArrays.of` / :meth:`SnapshotTables.of`. :func:`manifest_problems`
is the schema check :func:`qortex_core.storage.snapshot.load` runs: a manifest that is valid
JSON but names no file for an array or table, or lacks a count, is refused like a corrupt one.

Nodes are phrases (concepts) ``[0, n_phrases)`` then passages ``[n_phrases, n_nodes)``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from qortex_core.errors import SnapshotError
from qortex_core.storage.segmented_rows import ROWS_SUFFIX
from qortex_core.storage.segmented_table import (
    MANIFEST_KEY,
    RUNS_SUFFIX,
    stems_under,
    table_segments_of,
)


class LoadedSnapshot(Protocol):
    """What :meth:`SnapshotArrays.of` and :meth:`SnapshotTables.of` read of a loaded
    :class:`~qortex_core.storage.snapshot.Snapshot` (named here so this module, which that one
    imports, does not import it back)."""

    @property
    def arrays(self) -> Mapping[str, np.ndarray]: ...

    @property
    def tables(self) -> Mapping[str, pa.Table]: ...

    @property
    def manifest(self) -> dict: ...


@dataclass(frozen=True)
class SnapshotArrays:
    """The graph's arrays (memory-mapped ``.npy`` files once loaded).

    Attributes:
        adj_indptr: (n_nodes + 1,) int32 (int64 past 2**31 edges) CSR row pointers.
        adj_indices: (nnz,) int32 column indices of the symmetric weighted adjacency.
        adj_data: (nnz,) float32 edge weights.
        passage_vectors: (n_passages, d) float32 unit passage embeddings.
        fact_vectors: (n_facts, d) float32 unit fact embeddings.
        fact_nodes: (n_facts, 2) int32 subject/object phrase index per fact.
        phrase_vectors: (n_phrases, d) float32 unit concept embeddings.
        phrase_passage_count: (n_phrases,) passages each phrase was extracted from.
        phrase_text_frequency: (n_phrases,) passages whose text names the phrase.
        fact_passage_indptr: (n_facts + 1,) CSR row pointers of each fact's source passages.
        fact_passage_indices: (n_fact_sources,) passage indices.
        synonym_pairs: (n_synonyms, 2) int32 phrase index pairs.
        synonym_weights: (n_synonyms,) float32 edge weights after ``synonym_scale``.
        fact_cell_centroids: (cells, d) float32 centroids of the fact index, (0, 1) without one
            (:mod:`qortex_core.ingest.cells`; facts are then stored cell by cell).
        fact_cell_bounds: (cells + 1,) int64: cell ``c`` holds facts ``bounds[c]:bounds[c+1]``.
            Both are optional on load (snapshots built before the index have neither).
        adj_degree: (n_nodes,) float32 weighted degree of every node (the adjacency's row
            sums), written by a builder that checked the adjacency symmetric and non-negative:
            a retriever then builds its walk without summing or checking the adjacency at
            open. Optional on load (absent or (0,) in snapshots built before it, or by a builder
            that does not store them: the degrees are then summed at open).
        phrase_key_hashes: (k,) int64 sorted hashes of the concepts' non-null phrase keys
            (table ``phrase_keys``), and phrase_key_rows: (k,) int32 the concept row of each
            (:func:`qortex_core.storage.arrow_access.sorted_key_hashes`): a retriever's phrase
            lookup without hashing and sorting every key at open. Optional on load (absent or
            (0,): the lookup is built at open).
    """

    adj_indptr: np.ndarray
    adj_indices: np.ndarray
    adj_data: np.ndarray
    passage_vectors: np.ndarray
    fact_vectors: np.ndarray
    fact_nodes: np.ndarray
    phrase_vectors: np.ndarray
    phrase_passage_count: np.ndarray
    phrase_text_frequency: np.ndarray
    fact_passage_indptr: np.ndarray
    fact_passage_indices: np.ndarray
    synonym_pairs: np.ndarray
    synonym_weights: np.ndarray
    fact_cell_centroids: np.ndarray = field(default_factory=lambda: np.zeros((0, 1), np.float32))
    fact_cell_bounds: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    adj_degree: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    phrase_key_hashes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    phrase_key_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    def as_dict(self) -> dict[str, np.ndarray]:
        """File stem -> array, for :func:`qortex_core.storage.snapshot.publish`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def of(cls, snapshot: LoadedSnapshot) -> SnapshotArrays:
        """The typed arrays of a loaded snapshot (no copy).

        Raises:
            SnapshotError: an array is missing (a snapshot built before this schema).
        """
        optional = {n: snapshot.arrays[n] for n in OPTIONAL_ARRAYS if n in snapshot.arrays}
        return cls(**_pick(snapshot.arrays, REQUIRED_ARRAYS, "array", snapshot), **optional)


@dataclass(frozen=True)
class SnapshotTables:
    """The snapshot's Arrow tables (memory-mapped IPC files once loaded).

    Attributes:
        nodes: ``id``, ``kind`` (phrase | passage), ``name`` per node, in node order.
        passages: passage rows without vectors (``id``, ``doc_id``, ``title``, ``text``,
            ``domain``, ...), in passage order.
        facts: ``id``, ``subject``, ``predicate``, ``object`` per fact, in fact order.
        rules: ``id``, ``text``, ``category``, ``confidence``, ``concept_nodes``, ``domains``
            and ``passages`` (source passage indices; absent in snapshots built before).
    """

    nodes: pa.Table
    passages: pa.Table
    facts: pa.Table
    rules: pa.Table

    def as_dict(self) -> dict[str, pa.Table]:
        """File stem -> table, for :func:`qortex_core.storage.snapshot.publish`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def of(cls, snapshot: LoadedSnapshot) -> SnapshotTables:
        """The typed tables of a loaded snapshot.

        Raises:
            SnapshotError: a table is missing.
        """
        return cls(**_pick(snapshot.tables, TABLE_NAMES, "table", snapshot))


@dataclass(frozen=True)
class SnapshotCounts:
    """The manifest's ``counts``: nodes and edges by kind."""

    phrases: int
    passages: int
    facts: int
    rules: int
    nodes: int
    edges: int  # undirected, after merging parallel edges
    synonym_edges: int
    contains: int  # passage -> phrase links

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def of(cls, manifest: dict) -> SnapshotCounts:
        """The counts of a manifest that passed :func:`manifest_problems`."""
        return cls(**{name: int(manifest["counts"][name]) for name in COUNT_NAMES})


ARRAY_NAMES = tuple(f.name for f in fields(SnapshotArrays))
OPTIONAL_ARRAYS = (
    "fact_cell_centroids",
    "fact_cell_bounds",
    "adj_degree",
    "phrase_key_hashes",
    "phrase_key_rows",
)
REQUIRED_ARRAYS = tuple(n for n in ARRAY_NAMES if n not in OPTIONAL_ARRAYS)
TABLE_NAMES = tuple(f.name for f in fields(SnapshotTables))
COUNT_NAMES = tuple(f.name for f in fields(SnapshotCounts))
REQUIRED_KEYS = ("name", "version", "embedding_model", "counts", "files")


def _pick(
    found: Mapping[str, Any], names: tuple[str, ...], what: str, snapshot: LoadedSnapshot
) -> dict:
    missing = [n for n in names if n not in found]
    if missing:
        name = snapshot.manifest.get("name") or "in memory"
        raise SnapshotError(f"snapshot {name} is incomplete: no {what} {', '.join(missing)}")
    return {n: found[n] for n in names}


def manifest_problems(manifest: dict) -> list[str]:
    """What a manifest lacks: top-level keys, array and table files, counts. Empty when whole."""
    problems = [f"no {key!r}" for key in REQUIRED_KEYS if key not in manifest]
    files = manifest.get("files")
    if isinstance(files, dict):
        split = segments_of(manifest)
        arrays = [n for n in REQUIRED_ARRAYS if f"{n}.npy" not in files and n not in split]
        joined = table_segments_of(manifest)
        tables = [n for n in TABLE_NAMES if f"{n}.arrow" not in files and n not in joined]
        problems += [f"no array {', '.join(arrays)}"] if arrays else []
        problems += [f"no table {', '.join(tables)}"] if tables else []
    counts = manifest.get("counts")
    if "counts" in manifest and not isinstance(counts, dict):
        problems.append("'counts' is not an object")
    elif isinstance(counts, dict):
        bad = [
            n
            for n in COUNT_NAMES
            if not isinstance(counts.get(n), int) or isinstance(counts.get(n), bool)
        ]
        problems += [f"no count {', '.join(bad)}"] if bad else []
    return problems


def segments_of(manifest: dict) -> dict[str, list[str]]:
    """The arrays the manifest stores as segments and a row map
    (:mod:`~qortex_core.storage.segmented_rows`): array name -> its segments' file stems (a
    malformed entry is none: the array is then missing)."""
    return stems_under(manifest, "segments")


def linked_segments(manifest: dict, files: Collection[str]) -> dict:
    """``manifest`` with segments only for the arrays whose row map (the tables whose runs)
    are among the ``files`` linked in (one written from memory is written whole, whatever its
    manifest said)."""
    kept = {k: v for k, v in manifest.items() if k not in ("segments", MANIFEST_KEY)}
    for key, suffix, found in (
        ("segments", ROWS_SUFFIX, segments_of(manifest)),
        (MANIFEST_KEY, RUNS_SUFFIX, table_segments_of(manifest)),
    ):
        linked = {n[: -len(suffix)] for n in files if n.endswith(suffix)}
        split = {k: v for k, v in found.items() if k in linked}
        kept.update({key: split} if split else {})
    return kept


def check_manifest(manifest: dict, name: str) -> None:
    """Refuse an incomplete manifest.

    Raises:
        SnapshotError: one line naming everything missing.
    """
    problems = manifest_problems(manifest)
    if problems:
        raise SnapshotError(f"snapshot {name} has an incomplete manifest: {'; '.join(problems)}")
