"""The arrays and tables of one loaded snapshot, in the shapes the query path reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from qortex_core.query.fact_index import FactIndex
from qortex_core.query.ppr.csr_views import compressed_view
from qortex_core.query.rules import RuleIndex
from qortex_core.query.scoring import FactSources
from qortex_core.storage import snapshot as snap
from qortex_core.storage import times
from qortex_core.storage.arrow_access import ArrowRows, ArrowStrings, Codes, HashLookup
from qortex_core.storage.phrase_keys import PHRASE_KEYS, phrase_key, phrase_keys
from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotTables


@dataclass(frozen=True)
class SnapshotView:
    """Read-only view of a snapshot's graph: nodes ``[phrases | passages]``, facts and vectors.

    No attribute holds a Python object per node or passage: arrays are the snapshot's memory
    maps (or numpy arrays of a few bytes a row), strings and rows stay in the memory-mapped
    Arrow tables and are read only for the rows a query returns (``take``).

    Attributes:
        name: the snapshot's name (``v000001-...``).
        n_phrases: phrase (concept) nodes come first in the node order.
        adjacency: (n_nodes, n_nodes) symmetric weighted graph.
        degree: (n_nodes,) its weighted degrees as the snapshot stores them, checked symmetric
            at build; None for a snapshot built before (the walk then sums them at open).
        passage_vectors: (n_passages, d) unit passage embeddings.
        fact_vectors: (n_facts, d) unit fact embeddings.
        fact_nodes: (n_facts, 2) subject/object phrase index per fact.
        passage_count: (n_phrases,) passages each phrase was extracted from.
        text_count: (n_phrases,) passage-text frequency, never below ``passage_count``.
        fact_passages: CSR (indptr, indices) of each fact's source passages.
        fact_sources: the same sources laid out for the per-query context max (gathers).
        node_ids, node_names: per node, read on demand from the nodes table.
        passages: passage rows (id, title, text, domain, ...) as dicts, read on demand.
        facts: the facts table.
        phrase_index: normalised concept name -> phrase index, for verbatim matches (hashed).
        domains: (n_passages,) dictionary-encoded domain per passage.
        phrase_vectors: (n_phrases, d) concept embeddings, or (0, 1) when the snapshot has none.
        rule_index: the snapshot's rules by concept.
        passage_times: (n_passages,) event time as epoch seconds, NaN where a passage has none.
        sequenced: share of passages linked to a neighbouring item of their source (turns of a
            conversation, :mod:`qortex_core.ingest.sequence`); 0 for a snapshot built before.
    """

    name: str
    n_phrases: int
    adjacency: sp.csr_matrix
    degree: np.ndarray | None
    passage_vectors: np.ndarray
    fact_vectors: np.ndarray
    fact_nodes: np.ndarray
    passage_count: np.ndarray
    text_count: np.ndarray
    fact_passages: tuple[np.ndarray, np.ndarray]
    fact_sources: FactSources
    node_ids: ArrowStrings
    node_names: ArrowStrings
    passages: ArrowRows
    facts: pa.Table
    phrase_index: HashLookup
    domains: Codes
    phrase_vectors: np.ndarray
    rule_index: RuleIndex
    passage_times: np.ndarray
    sequenced: float = 0.0
    fact_index: FactIndex | None = None  # facts by cell (big snapshots), for fact linking

    @classmethod
    def of(cls, snapshot: snap.Snapshot) -> "SnapshotView":
        """The view of a loaded snapshot (arrays and tables stay memory-mapped).

        Raises:
            SnapshotError: the snapshot lacks an array or table of
                :mod:`qortex_core.storage.snapshot_schema`.
        """
        a, t = SnapshotArrays.of(snapshot), SnapshotTables.of(snapshot)
        n_phrases = snapshot.n_phrases
        passage_count = np.asarray(a.phrase_passage_count, dtype=np.float32)
        text_count = np.asarray(a.phrase_text_frequency, dtype=np.float32)
        names = ArrowStrings(t.nodes["name"])
        fact_passages = (np.asarray(a.fact_passage_indptr), np.asarray(a.fact_passage_indices))
        return cls(
            name=snapshot.manifest["name"],
            n_phrases=n_phrases,
            adjacency=snapshot.adjacency,
            degree=a.adj_degree if a.adj_degree.shape[0] else None,
            passage_vectors=a.passage_vectors,
            fact_vectors=a.fact_vectors,
            fact_nodes=np.asarray(a.fact_nodes),  # (n_facts, 2) int32, memory-mapped
            passage_count=passage_count,
            # verbatim seeds' specificity: text frequency, never below the extracted count
            text_count=np.maximum(text_count, passage_count),
            fact_passages=fact_passages,
            fact_sources=FactSources.of(*fact_passages),
            node_ids=ArrowStrings(t.nodes["id"]),
            node_names=names,
            passages=ArrowRows(t.passages),
            facts=t.facts,
            phrase_index=_phrase_index(snapshot, a, names, n_phrases),
            domains=Codes.of(t.passages["domain"]),
            phrase_vectors=a.phrase_vectors,
            rule_index=RuleIndex.from_table(t.rules),
            passage_times=_epochs(t.passages),
            sequenced=_sequenced(snapshot.manifest, t.passages.num_rows),
            fact_index=(
                FactIndex.of(
                    a.fact_cell_centroids, a.fact_cell_bounds, fact_passages, t.passages.num_rows
                )
                if a.fact_cell_centroids.shape[0] and a.fact_vectors.shape[0]
                else None
            ),
        )

    @property
    def n_passages(self) -> int:
        return self.adjacency.shape[0] - self.n_phrases

    @property
    def has_facts(self) -> bool:
        return self.fact_vectors.shape[0] > 0

    def passage_phrases(self) -> sp.csr_matrix:
        """(n_passages, n_phrases) passage-to-concept block of the adjacency.

        When passages link only to concepts (as snapshots are built) the block is the passage
        rows themselves: a view sharing the adjacency's arrays, not a copy.
        """
        a, n = self.adjacency, self.n_phrases
        start = int(a.indptr[n])
        if a.nnz == start or int(a.indices[start:].max()) < n:
            return compressed_view(
                sp.csr_matrix, a.data[start:], a.indices[start:], a.indptr[n:] - start,
                (a.shape[0] - n, n),
            )  # fmt: skip
        return a[n:, :n].tocsr()

    def phrases_of(self, passage: int) -> np.ndarray:
        """Phrase node indices adjacent to passage ``passage`` (in adjacency order)."""
        node = self.n_phrases + passage
        row = self.adjacency.indices[self.adjacency.indptr[node] : self.adjacency.indptr[node + 1]]
        return row[row < self.n_phrases]

    def domain_mask(self, domains: Sequence[str] | None) -> np.ndarray | None:
        """(n_passages,) True for passages in ``domains``; None when every domain is allowed."""
        return self.domains.mask(domains) if domains else None

    def allowed(
        self, domains: Sequence[str] | None, since: str | None = None, until: str | None = None
    ) -> np.ndarray | None:
        """(n_passages,) True for passages in ``domains`` with an event time in [since, until]
        (ISO 8601 UTC bounds); None when nothing is filtered. Results are filtered, never the walk.
        """
        optional = [self.domain_mask(domains), times.window_mask(self.passage_times, since, until)]
        masks = [m for m in optional if m is not None]
        return np.logical_and.reduce(masks) if masks else None


def _phrase_index(
    snapshot: snap.Snapshot, a: SnapshotArrays, names: ArrowStrings, n_phrases: int
) -> HashLookup:
    """The concepts' phrase-key lookup: as the snapshot stores it, else built from the keys."""
    hashes, rows = a.phrase_key_hashes, a.phrase_key_rows
    if len(hashes) and len(hashes) == len(rows) and len(rows) <= n_phrases:
        return HashLookup.stored(hashes, rows, names[:n_phrases], phrase_key)
    return HashLookup.build(names[:n_phrases], phrase_key, _keys(snapshot, names, n_phrases))


def _keys(snapshot: snap.Snapshot, names: ArrowStrings, n_phrases: int) -> pa.Array:
    """Each concept's phrase key: as the snapshot stores them (:data:`PHRASE_KEYS`), else
    made from the names (a snapshot built before the table)."""
    stored = snapshot.tables.get(PHRASE_KEYS)
    if stored is not None and stored.num_rows == n_phrases:
        return stored["key"].combine_chunks()
    return phrase_keys(names[:n_phrases].column)


def _epochs(passages: pa.Table) -> np.ndarray:
    """(n_passages,) float64 epoch seconds of the ``time`` column, NaN where none (parsed by
    an Arrow kernel: no Python object per passage)."""
    n = passages.num_rows
    if "time" not in passages.column_names or passages["time"].null_count == n:
        return np.full(n, np.nan)
    return times.epoch_array(pc.cast(passages["time"], pa.string()))


def _sequenced(manifest: dict, n_passages: int) -> float:
    """Share of passages the manifest's ``sequence`` counts as linked to a neighbour."""
    linked = (manifest.get("sequence") or {}).get("passages", 0)
    return float(linked) / n_passages if n_passages and isinstance(linked, int) else 0.0
