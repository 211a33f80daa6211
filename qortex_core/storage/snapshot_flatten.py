"""A published snapshot's segmented arrays and tables (:mod:`.segmented_rows`,
:mod:`.segmented_table`) written whole, in place.

A segmented array or table reads the rows it uses, but its base file still holds the rows of
facts and concepts removed since that file was written. ``qortex purge`` promises that deleted
data is gone from disk, so it writes each retained snapshot's segmented arrays as plain
``.npy`` files and its segmented tables as plain ``.arrow`` files (the same rows: readers see
the same array and table) and deletes the segments, whose bytes then go with the last
snapshot linking them.
"""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import numpy as np

from qortex_core.storage import snapshot as snap
from qortex_core.storage.checksums import HashingWriter
from qortex_core.storage.segmented_rows import SegmentedRows, rows_stem
from qortex_core.storage.segmented_table import MANIFEST_KEY, runs_stem, table_segments_of
from qortex_core.storage.snapshot_files import write_arrow, write_flushed, write_header
from qortex_core.storage.snapshot_schema import segments_of

_BLOCK_ROWS = 1 << 16  # rows copied at once


def _plain_rows(rows: SegmentedRows, fh: HashingWriter) -> None:
    """``rows`` (float32 vectors) as a plain ``.npy`` file, a block of rows at a time."""
    write_header(fh, *rows.shape)
    for s in range(0, len(rows), _BLOCK_ROWS):
        fh.write(np.ascontiguousarray(rows[s : s + _BLOCK_ROWS]).data.cast("B"))


def replace_manifest(folder: Path, manifest: dict) -> None:
    """Swap the manifest of the published snapshot ``folder`` for ``manifest`` atomically
    (written beside it and flushed first)."""
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, folder / "manifest.json")


def flatten(home: str | Path, name: str) -> tuple[str, ...]:
    """Write snapshot ``name``'s segmented arrays and tables whole and swap its manifest
    atomically; the arrays and tables written (none when it has no segments).

    Raises:
        SnapshotError: the snapshot does not load (verified first: a damaged one is not copied).
    """
    folder = snap.snapshots_dir(home) / name
    manifest = json.loads((folder / "manifest.json").read_text())
    split, joined = segments_of(manifest), table_segments_of(manifest)
    if not split and not joined:
        return ()
    loaded = snap.load(home, name)
    files = dict(manifest["files"])
    gone = []
    for array, stems in split.items():
        tmp = folder / f".{array}.flat"
        digest = write_flushed(tmp, partial(_plain_rows, loaded.arrays[array]))  # type: ignore[arg-type]
        os.replace(tmp, folder / f"{array}.npy")
        files[f"{array}.npy"] = digest
        for stem in (*stems, rows_stem(array)):
            files.pop(f"{stem}.npy", None)
            gone.append(folder / f"{stem}.npy")
    for table, stems in joined.items():
        tmp = folder / f".{table}.flat"
        # by blocks of rows, each copied into buffers of its own: no byte of a row left out
        digest = write_flushed(tmp, partial(write_arrow, loaded.tables[table], blocks=True))
        os.replace(tmp, folder / f"{table}.arrow")
        files[f"{table}.arrow"] = digest
        for file in (*(f"{s}.arrow" for s in stems), f"{runs_stem(table)}.npy"):
            files.pop(file, None)
            gone.append(folder / file)
    body = {k: v for k, v in manifest.items() if k not in ("segments", MANIFEST_KEY)}
    replace_manifest(folder, dict(body, files=files))  # readers: the segments or the whole array
    del loaded  # its maps of the segments, before they are deleted
    for path in gone:
        path.unlink(missing_ok=True)
    return (*split, *joined)
