"""An incremental build's large vector arrays as the base's file plus a delta
(:class:`~qortex_core.storage.segmented_rows.SegmentedRows`), not written again row by row.

A merged array (:func:`.snapshot_base.write_merged`) is made of the base's rows, in a new
order, and a few new ones. Where the base's first segment (its whole file, when the base
stored the array plainly) still holds most of the rows, the new snapshot links that file in
and writes only a delta (the rows it lacks: the new ones, and those of the base's own delta
still used) and a row map. A delta past :data:`DELTA_SHARE` of the rows, or a base file whose
rows are mostly gone (:data:`KEEP_SHARE`), makes a plain file again: the compaction, whose
cost is a full write, once per that share of change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from qortex_core.ingest import snapshot_vectors as vectors
from qortex_core.storage.checksums import HashingWriter
from qortex_core.storage.segmented_rows import SegmentedRows, rows_stem

DELTA_SHARE = 0.125  # a delta of more than this share of the rows: the array is written whole
KEEP_SHARE = 0.75  # a base file of which fewer rows are still used: written whole
_BLOCK = 1 << 16  # delta rows gathered and written at once


def _base_segment(
    old: np.ndarray | SegmentedRows, base_files: dict[str, str]
) -> tuple[np.ndarray, Path, str, np.ndarray | None, np.ndarray | None] | None:
    """The base's first segment (array, file, digest), its row map (None: the identity) and
    its delta (None: none); None when the base's array is no file of its snapshot."""
    if isinstance(old, SegmentedRows):
        first, path = old.segments[0], old.paths[0]
        delta = old.segments[1] if len(old.segments) > 1 else None
        digest = base_files.get(path.name)
        return None if digest is None else (first, path, digest, old.rows, delta)
    filename = getattr(old, "filename", None)
    if not isinstance(old, np.memmap) or not filename:
        return None
    path = Path(filename)
    digest = base_files.get(path.name)
    return None if digest is None else (old, path, digest, None, None)


def segment_stem(name: str, digest: str) -> str:
    """A segment's file stem: the array's or table's name and the tail of the file's checksum."""
    return f"{name}-{digest.rsplit(':', 1)[-1][-12:]}"


def segmented(
    array: str,
    old: np.ndarray | SegmentedRows,
    base_files: dict[str, str],
    rows: np.ndarray,
    same: np.ndarray,
    fresh: np.ndarray,
    path: Path,
) -> SegmentedRows | None:
    """The merged array as the base's first segment plus a delta written beside ``path``, or
    None where a plain file is due (no usable base file, or past the shares above).

    Args:
        array: the snapshot array's name (``fact_vectors``).
        old: the base's array; ``base_files`` its manifest's file checksums.
        rows, same: (n,) each row's base row, and whether the base holds its vector.
        fresh: (k, d) the vectors of the rows not ``same``, in row order.
        path: the plain file's path; the delta and the row map go beside it.
    """
    found = _base_segment(old, base_files)
    if found is None:
        return None
    first, first_path, first_digest, base_map, base_delta = found
    n, held = len(same), len(first)
    phys = np.full(n, -1, np.int64)  # (n,) physical row in the base's segments, -1 new
    phys[same] = rows[same] if base_map is None else base_map[rows[same]]
    in_first = (phys >= 0) & (phys < held)
    extra = np.flatnonzero(~in_first)  # (e,) rows the delta holds, in row order
    if len(extra) > DELTA_SHARE * n or int(in_first.sum()) < KEEP_SHARE * held:
        return None
    fresh_at = np.cumsum(~same) - 1  # (n,) each new row's row of ``fresh``
    dim = int(first.shape[1])
    segments, names, paths = [first], [segment_stem(array, first_digest)], [first_path]
    vectors.WRITTEN.record(first_path, first_digest)  # linked, not hashed again
    if len(extra):
        delta_path = path.with_name(f"{path.stem}-delta.npy")
        with HashingWriter(delta_path) as fh:
            vectors.write_header(fh, len(extra), dim)
            for s in range(0, len(extra), _BLOCK):
                at = extra[s : s + _BLOCK]
                block = np.empty((len(at), dim), np.float32)
                kept = same[at]  # from the base's delta, the rest new
                if kept.any() and base_delta is not None:
                    block[kept] = base_delta[phys[at[kept]] - held]
                block[~kept] = fresh[fresh_at[at[~kept]]]
                fh.write(block.data.cast("B"))
        vectors.WRITTEN.record(delta_path, fh.digest())
        segments.append(vectors.load(delta_path))
        names.append(segment_stem(array, fh.digest()))
        paths.append(delta_path)
    row_map = phys
    row_map[extra] = held + np.arange(len(extra))
    small = held + len(extra) < 2**31
    row_map = row_map.astype(np.int32 if small else np.int64)
    map_path = path.with_name(f"{rows_stem(path.stem)}.npy")
    with HashingWriter(map_path) as fh:
        np.lib.format.write_array(fh, row_map, allow_pickle=False)
    vectors.WRITTEN.record(map_path, fh.digest())
    return SegmentedRows(segments, vectors.load(map_path), names, [*paths, map_path])
