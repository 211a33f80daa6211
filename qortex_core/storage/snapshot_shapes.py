"""Counts that lie: a manifest whose counts disagree with its arrays and tables.

Checksums prove the files are the ones written, and the schema check proves the manifest names
every file and count; neither proves they agree. A count that says 10**9 phrases over arrays of
15 rows (or -1, or 0) would crash the first query on mismatched shapes. :func:`shape_problems`
compares every count with the rows it describes, reading only shapes and one CSR pointer.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pyarrow as pa

# a graph-only snapshot (the PPR memory probe's) stores no vectors and no passage text; an empty
# adj_degree is one a builder did not store (the degrees are then summed at open)
MAY_BE_EMPTY = ("passage_vectors", "fact_vectors", "phrase_vectors", "passages", "adj_degree")


def _rows(found: Mapping[str, object], name: str) -> int | None:
    item = found.get(name)
    if isinstance(item, pa.Table):
        return item.num_rows
    return int(item.shape[0]) if isinstance(item, np.ndarray) and item.ndim >= 1 else None


def shape_problems(
    arrays: Mapping[str, np.ndarray], tables: Mapping[str, pa.Table], counts: Mapping[str, int]
) -> list[str]:
    """Where ``counts`` disagree with the arrays and tables (empty when they agree)."""
    found = {**arrays, **tables}
    problems = [f"count {k} is {v}" for k, v in counts.items() if isinstance(v, int) and v < 0]
    nodes, phrases, passages = counts.get("nodes"), counts.get("phrases"), counts.get("passages")
    if (
        nodes is not None
        and phrases is not None
        and passages is not None
        and nodes != phrases + passages
    ):
        problems.append(f"nodes {nodes} != phrases {phrases} + passages {passages}")
    expected = {  # item -> (count, extra rows: CSR pointers have one more)
        "adj_indptr": ("nodes", 1),
        "adj_degree": ("nodes", 0),
        "nodes": ("nodes", 0),
        "phrase_vectors": ("phrases", 0),
        "phrase_passage_count": ("phrases", 0),
        "phrase_text_frequency": ("phrases", 0),
        "passage_vectors": ("passages", 0),
        "passages": ("passages", 0),
        "fact_vectors": ("facts", 0),
        "fact_nodes": ("facts", 0),
        "fact_passage_indptr": ("facts", 1),
        "facts": ("facts", 0),
    }
    for item, (count, extra) in expected.items():
        rows = _rows(found, item)
        if rows == 0 and item in MAY_BE_EMPTY:
            continue
        if rows is not None and count in counts and rows != counts[count] + extra:
            problems.append(
                f"{item} has {rows} rows but the manifest counts {count} {counts[count]}"
            )
    problems += _cell_problems(arrays, counts.get("facts"))
    degree = arrays.get("adj_degree")
    if degree is not None and (degree.ndim != 1 or degree.dtype != np.float32):
        problems.append(
            f"adj_degree is {degree.dtype} of shape {degree.shape}, not (nodes,) float32"
        )
    problems += _lookup_problems(arrays, counts.get("phrases"))
    indptr, indices = arrays.get("adj_indptr"), arrays.get("adj_indices")
    if indptr is not None and indices is not None and len(indptr):
        if int(indptr[-1]) != len(indices) or len(arrays.get("adj_data", indices)) != len(indices):
            problems.append("the adjacency's pointers, indices and weights disagree")
    dims = {
        int(arrays[n].shape[1])
        for n in ("passage_vectors", "fact_vectors", "phrase_vectors")
        if n in arrays and arrays[n].ndim == 2 and arrays[n].shape[0]
    }
    if len(dims) > 1:
        problems.append(f"vectors of different widths {sorted(dims)}")
    return problems


def _cell_problems(arrays: Mapping[str, np.ndarray], facts: int | None) -> list[str]:
    """Where the fact index disagrees with itself or the fact count (none without an index)."""
    centroids, bounds = arrays.get("fact_cell_centroids"), arrays.get("fact_cell_bounds")
    if centroids is None or bounds is None or centroids.shape[0] == 0:
        return []
    if bounds.ndim != 1 or len(bounds) != centroids.shape[0] + 1:
        return ["the fact index's centroids and bounds disagree"]
    steps = np.diff(bounds)
    if int(bounds[0]) != 0 or (steps < 0).any() or (facts is not None and bounds[-1] != facts):
        return [f"the fact index covers {int(bounds[-1])} facts, not the manifest's {facts}"]
    return []


def _lookup_problems(arrays: Mapping[str, np.ndarray], phrases: int | None) -> list[str]:
    """Where the stored phrase lookup disagrees with itself or the phrase count (none when it
    is not stored: it is built at open)."""
    hashes, rows = arrays.get("phrase_key_hashes"), arrays.get("phrase_key_rows")
    if hashes is None or rows is None or (hashes.shape[0] == 0 and rows.shape[0] == 0):
        return []
    if hashes.ndim != 1 or rows.ndim != 1 or hashes.shape != rows.shape:
        return ["the phrase lookup's hashes and rows disagree"]
    if hashes.dtype != np.int64 or rows.dtype.kind != "i":
        return [f"the phrase lookup is {hashes.dtype} and {rows.dtype}, not int64 and integers"]
    if phrases is not None and len(rows) > phrases:
        return [f"the phrase lookup holds {len(rows)} keys for {phrases} phrases"]
    return []
