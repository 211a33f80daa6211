"""The graph_snapshot stage: graph arrays and tables assembled from the stored tables
(:mod:`qortex_core.storage.snapshot_schema`) and published as the new latest snapshot."""

from __future__ import annotations

import json
import logging
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable, cast

import numpy as np
import pyarrow as pa

from qortex_core.errors import SnapshotError
from qortex_core.ingest import snapshot_base, snapshot_edges, snapshot_words
from qortex_core.ingest.allocators import give_back
from qortex_core.ingest.cells import FactCells
from qortex_core.ingest.graph import (
    GraphConfig,
    GraphInput,
    build_adjacency,
    phrase_passage_counts,
)
from qortex_core.ingest.snapshot_base import KEYS
from qortex_core.ingest.snapshot_cells import layout_of
from qortex_core.ingest.snapshot_facts import FACT_LINKS, links_of
from qortex_core.ingest.snapshot_keys import phrase_key_table, phrase_lookup
from qortex_core.ingest.snapshot_publish import base_rows_of, publish, split_tables
from qortex_core.ingest.snapshot_read import Merge, read_stored
from qortex_core.ingest.snapshot_read import Stored as _Stored
from qortex_core.ingest.snapshot_tables import snapshot_tables
from qortex_core.ingest.snapshot_vectors import VectorFiles
from qortex_core.storage import fulltext, ids, retention, text_beside
from qortex_core.storage import snapshot as snap
from qortex_core.storage.phrase_keys import PHRASE_KEYS
from qortex_core.storage.snapshot_schema import SnapshotArrays, SnapshotCounts
from qortex_core.storage.store import (
    CONCEPTS,
    FACTS,
    PASSAGES,
    RULES,
    SYNONYMS,
    LanceStore,
)
from qortex_core.storage.symmetry import check_symmetric, weighted_degree


# -- snapshot -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SnapshotReport:
    """A published snapshot: its name (``v000003-1a2b3c4d``), version, folder and counts, and
    how this run made it.

    Attributes:
        mode: ``unchanged`` (the latest snapshot stands), ``incremental`` (vectors merged from
            the previous snapshot, :mod:`.snapshot_base`) or ``full``.
        reason: why that mode, in a few words.
        rows_added, rows_changed, rows_removed: passage, concept and fact rows against the
            previous snapshot (tables read in full are not compared: 0).
        dangling: the stored tables' dangling edges as this build found them
            (:func:`qortex_core.ops.table_checks.dangling_edges`' counts); None when not counted
            (an unchanged snapshot, or no concept or passage to count against).
        retired: older snapshots deleted once this one was published, past the retention
            (:func:`qortex_core.storage.retention.retire_snapshots`).
    """

    name: str
    version: int
    path: Path
    counts: SnapshotCounts
    mode: str = "full"
    reason: str = ""
    rows_added: int = 0
    rows_changed: int = 0
    rows_removed: int = 0
    dangling: dict[str, int] | None = None
    retired: tuple[str, ...] = ()


_log = logging.getLogger(__name__)
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


def _latest_with_inputs(latest: snap.Snapshot | None, inputs: str) -> SnapshotReport | None:
    """The latest snapshot (verified: a damaged one is rebuilt, not kept) when it was built
    from ``inputs`` by this format, else None (a snapshot from before the stored degrees is
    rebuilt once, so its retriever opens lighter)."""
    if latest is None or latest.manifest.get("inputs_digest") != inputs or latest.path is None:
        return None
    if "adj_degree.npy" not in latest.manifest.get("files", {}):
        return None
    path = Path(latest.path)
    counts = SnapshotCounts.of(latest.manifest)
    return SnapshotReport(path.name, latest.version, path, counts, "unchanged", "same inputs")


def _stands(
    store: LanceStore, home: str | Path, versions: dict, spec: tuple, loading: Future
) -> SnapshotReport | None:
    """The latest snapshot, unchanged, when every input table, the full-text one too, is at
    the version it was built from (it pinned that text version after syncing it): nothing is
    read. ``spec``: model, graph config, parameters; ``loading``: the latest, verified."""
    text = fulltext.open_latest(store.db)
    now = dict(versions, **{fulltext.PASSAGE_TEXT: text.version if text is not None else 0})
    digest = _inputs_digest(now, *spec)
    if snap.latest_inputs(home) != digest:
        return None
    return _latest_with_inputs(loading.result()[0], digest)


def _report(
    path: Path, counts: SnapshotCounts, merge: Merge, why: str, dangling: dict[str, int] | None
) -> SnapshotReport:
    """The report of a published snapshot: incremental when any table was merged."""
    change = merge.change
    rows = (change.added, change.changed, change.removed, dangling)
    if merge.merged and merge.base is not None:
        source = merge.base.snapshot.manifest.get("name", "the previous snapshot")
        reason = f"vectors of {', '.join(merge.merged)} merged from {source}"
        if merge.read:
            reason += f"; {', '.join(merge.read)} read in full"
        if FACTS in merge.fresh:  # the rows too (ingest/snapshot_facts.py)
            reason += f"; fact rows from the base, {len(merge.fresh[FACTS][0])} read by id"
        return SnapshotReport(
            path.name, int(path.name[1:7]), path, counts, "incremental", reason, *rows
        )
    if not why and merge.read:
        why = "the change passed the share of rows a merge is for"
        snapshot_base.log_full(why)
    return SnapshotReport(path.name, int(path.name[1:7]), path, counts, "full", why, *rows)


def _graph_arrays(
    stored: _Stored,
    graph_config: GraphConfig,
    cells: FactCells | None = None,
    base: snapshot_base.Base | None = None,
) -> tuple[SnapshotArrays, int, int, dict[str, int], pa.Table]:
    """Every array of the snapshot, the number of undirected edges and of passage links, the
    sequence counts (``edges``, ``passages`` in a sequence) and the passages' word frequencies
    (counted on the change from ``base``'s, :mod:`.snapshot_words`)."""
    n_phr, n_pas = stored.concepts.num_rows, stored.passages.num_rows
    # the arrays that need no edge first: their transient memory is not added to the
    # adjacency's (the stage's peak, at 1M passages)
    text_frequency, words = snapshot_words.text_frequency(
        stored.passages, stored.concepts, base, stored.concept_base
    )
    indptr, indices = snapshot_edges.fact_passages(stored)
    fact_nodes, fact_pairs, fact_scale = snapshot_edges.fact_edges(stored, graph_config)
    contains = snapshot_edges.contains(stored)  # (n_links, 2) passage index, phrase index
    synonyms = snapshot_edges.synonym_edges(stored)
    sequence = snapshot_edges.sequence_edges(stored, graph_config)
    adj = build_adjacency(
        GraphInput(n_phr, n_pas, fact_pairs, contains, synonyms, fact_scale, sequence),
        graph_config,
    )
    del fact_pairs, fact_scale  # in the adjacency now
    try:  # a retriever trusts the stored degrees and does not check again
        check_symmetric(adj)
    except ValueError as exc:
        raise SnapshotError(f"the built graph cannot be published: {exc}") from None
    arrays = SnapshotArrays(
        # int32 indptr where it fits: with int64 indptr scipy would copy int32 indices on load
        adj_indptr=adj.indptr.astype(np.int32 if adj.nnz < 2**31 else np.int64, copy=False),
        adj_indices=adj.indices.astype(np.int32, copy=False),  # no copy: int32 already
        adj_data=adj.data.astype(np.float32, copy=False),
        adj_degree=weighted_degree(adj),
        # a reader takes the facts' and concepts' SegmentedRows as arrays (segmented_rows.py)
        passage_vectors=cast(np.ndarray, stored.vectors.get(PASSAGES)),
        fact_vectors=cast(np.ndarray, stored.vectors.get(FACTS)),
        fact_nodes=fact_nodes,
        phrase_vectors=cast(np.ndarray, stored.vectors.get(CONCEPTS)),
        phrase_passage_count=phrase_passage_counts(contains, n_phr),
        phrase_text_frequency=text_frequency,
        fact_passage_indptr=indptr,
        fact_passage_indices=indices,
        synonym_pairs=np.stack([synonyms[0], synonyms[1]], axis=1).astype(np.int32).reshape(-1, 2),
        synonym_weights=synonyms[2] * np.float32(graph_config.synonym_scale),
        **(
            {"fact_cell_centroids": cells.centroids, "fact_cell_bounds": cells.bounds}
            if cells is not None
            else {}
        ),
    )
    linked = len(np.union1d(sequence[0], sequence[1]))
    counted = {"edges": len(sequence[0]), "passages": linked}
    return arrays, int(adj.nnz // 2), len(contains), counted, words


def build_snapshot(
    store: LanceStore,
    home: str | Path,
    embedding_model: str,
    graph_config: GraphConfig = GraphConfig(),
    params: dict | None = None,
    force: bool = False,
    verify: Callable[[str], None] | None = None,
    keep: int | None = None,
    merge_base: bool = True,
) -> SnapshotReport:
    """Assemble graph arrays from the stored tables and publish them as the new latest snapshot.

    Unless ``force``, the latest stands when built from the same inputs (table versions, model,
    weights, parameters). ``verify(name)`` must pass before ``LATEST`` moves to it; then all but
    the ``keep`` newest are deleted (:func:`_retire`). ``merge_base=False``: a full build."""
    versions = store.versions()
    with ThreadPoolExecutor(1, thread_name_prefix="snapshot-base") as pool:
        loading = pool.submit(snapshot_base.latest, home)  # verified (hashed) meanwhile
        spec = (embedding_model, graph_config, params)  # with the versions: the inputs
        stands = None if force else _stands(store, home, versions, spec, loading)
        if stands is not None:
            return stands
        passages = store.read_without(PASSAGES, ["vector"])
        # the passages' BM25 index, incremental; the snapshot pins its version (fulltext.py);
        # when the embedding stage started its sync beside (text_beside.py), planned after it
        text_sync = (
            None if text_beside.pending(store.db) else fulltext.plan_sync(store.db, passages)
        )
        give_back()  # the plan's transient rows
        latest, why = loading.result()
    if text_sync is not None and text_sync.idle and not force:  # else the version moves
        versions[fulltext.PASSAGE_TEXT] = text_sync.version
        unchanged = _latest_with_inputs(latest, _inputs_digest(versions, *spec))
        if unchanged is not None:
            return unchanged
    asked = None, "a full build was asked for"
    base, other = snapshot_base.Base.of(latest, embedding_model) if merge_base else asked
    merge = Merge(base, dict(versions))
    folder = snap.staging_dir(home)
    # the index merge costs about the whole index: it runs beside the build, on its own table
    with ThreadPoolExecutor(1, thread_name_prefix="passage-text") as pool:
        synced = pool.submit(text_beside.synced, store.db, passages, text_sync)
        del text_sync  # its rows are the thread's now

        def manifest_base() -> dict:
            """Once the index is synced: what the snapshot was built from."""
            versions[fulltext.PASSAGE_TEXT] = synced.result()
            return _manifest_base(versions, embedding_model, graph_config, params)

        try:
            path, counts, dangling = _assemble(
                store, home, passages, graph_config, folder, manifest_base, merge, verify
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # the published files are links of its own
    return replace(
        _report(path, counts, merge, why or other, dangling), retired=_retire(home, keep)
    )


def _retire(home: str | Path, keep: int | None) -> tuple[str, ...]:
    """Delete the snapshots past the ``keep`` newest (default ``$QORTEX_SNAPSHOT_KEEP`` or 5:
    at 1M passages each is about 9 GB, and a schedule would otherwise fill the disk); a folder
    that cannot be deleted is one warning, not a failed build (the snapshot is published)."""
    try:
        return tuple(
            retention.retire_snapshots(home, retention.default_keep() if keep is None else keep)
        )
    except OSError as exc:
        _log.warning("graph_snapshot: older snapshots not deleted: %s", exc)
        return ()


def _manifest_base(
    versions: dict, embedding_model: str, graph_config: GraphConfig, params: dict | None
) -> dict:
    """The manifest's record of the inputs: table versions, model, their digest, parameters."""
    return {
        "embedding_model": embedding_model,
        "table_versions": versions,
        "inputs_digest": _inputs_digest(versions, embedding_model, graph_config, params),
        "params": dict(params or {}, graph=asdict(graph_config)),
    }


def _assemble(
    store: LanceStore,
    home: str | Path,
    passages: pa.Table,
    graph_config: GraphConfig,
    folder: Path,
    manifest_base: Callable[[], dict],
    merge: Merge,
    verify: Callable[[str], None] | None = None,
) -> tuple[Path, SnapshotCounts, dict[str, int] | None]:
    """Read, build and publish the snapshot, staging its vector files in ``folder`` (merged
    from ``merge``'s base where it has one, on a worker beside the build); the dangling edges
    it found."""
    with VectorFiles.beside() as files:
        stored, cells = read_stored(store, passages, graph_config, folder, merge, files)
        built = _Build(stored, cells, graph_config, folder)
        return _built(store, home, built, manifest_base, merge, verify)


@dataclass(frozen=True)
class _Build:
    """What a build read (``stored``, ``cells``), how to build it, and its staging folder."""

    stored: _Stored
    cells: FactCells | None
    graph_config: GraphConfig
    folder: Path


def _built(
    store: LanceStore,
    home: str | Path,
    built: _Build,
    manifest_base: Callable[[], dict],
    merge: Merge,
    verify: Callable[[str], None] | None = None,
) -> tuple[Path, SnapshotCounts, dict[str, int] | None]:
    """Build and publish the snapshot of ``built``; the dangling edges it found."""
    stored, cells, graph_config = built.stored, built.cells, built.graph_config
    give_back()  # what reading freed, before the graph is built
    arrays, edges, contains, sequence, words = _graph_arrays(
        stored, graph_config, cells, merge.base
    )
    dangling = snapshot_edges.dangling(stored)
    facts = stored.facts.select(list(KEYS[FACTS])) if stored.facts.num_rows else pa.table({})
    extra = {FACT_LINKS: links_of(stored.facts)} if stored.facts.num_rows else {}
    stored = replace(stored, facts=pa.table({}))  # the links are in the arrays now
    give_back()  # the links, before the tables are assembled
    tables = snapshot_tables(stored.concepts, stored.passages, facts, stored.rules)
    counts = SnapshotCounts(
        phrases=stored.concepts.num_rows,
        passages=stored.passages.num_rows,
        facts=len(arrays.fact_nodes),
        rules=tables.rules.num_rows,
        nodes=stored.concepts.num_rows + stored.passages.num_rows,
        edges=edges,
        synonym_edges=stored.synonyms.num_rows,
        contains=contains,
    )
    manifest = {
        **manifest_base(),
        "counts": counts.as_dict(),
        "sequence": sequence,  # conversational structure (ingest/sequence.py)
    }
    if cells is not None:  # what a later build needs to merge the cells (ingest/snapshot_cells.py)
        manifest["fact_cells"] = layout_of(len(cells.order), graph_config.fact_cells)
    extra[snapshot_words.WORDS] = words  # the next build's base, with the links
    # a retriever's lookup
    keys = phrase_key_table(stored.concepts, merge.base, stored.concept_base)
    extra[PHRASE_KEYS] = keys
    hashes, rows = phrase_lookup(keys["key"], merge.base, stored.concept_base)
    arrays = replace(arrays, phrase_key_hashes=hashes, phrase_key_rows=rows)
    kept = base_rows_of(tables, extra, merge.fact_base_rows, stored.concept_base, merge.base)
    split = split_tables(kept, merge.base, built.folder)
    digests = stored.vectors.digests()
    published = publish(home, arrays, tables, manifest, verify, extra, digests, split)
    return published, counts, dangling
