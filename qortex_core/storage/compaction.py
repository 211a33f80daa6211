"""Merging the small fragments that incremental runs leave in a table.

Every LanceDB write adds at least one fragment (a data file): a scheduled run that adds ten
passages appends a fragment of a few rows to each table it writes. Left alone they pile up,
one per run, and every later scan, keyed lookup and commit goes through all of them
(``qortex bench fragments`` measures it). So after a stage's writes, a table holding
:data:`MAX_SMALL` fragments of fewer than :data:`SMALL_ROWS` rows has those merged (pylance
``compact_files``, which keeps the rows' order and remaps the table's indexes): a run's cost
stays that of its change, however many runs came before.

Only small fragments are candidates (``target_rows_per_fragment`` = :data:`SMALL_ROWS`): a
full build's large fragments are never rewritten here, so a compaction costs at most a few
``SMALL_ROWS`` rows per table. Old versions are kept (a snapshot's recorded versions and the
stages' chains of changes still name them); ``qortex snapshots prune`` and ``qortex purge``
remove them, as before.
"""

from __future__ import annotations

import logging

_log = logging.getLogger(__name__)
SMALL_ROWS = 4096  # fewer rows: a small fragment, as a run appends (a full build writes
# 8,192 rows and more to each but the last of a batched write: never rewritten here)
MAX_SMALL = 16  # small fragments a table may hold before they are merged


def small_fragments(fragments: list) -> int:
    """How many of the pylance ``fragments`` hold fewer than :data:`SMALL_ROWS` rows (from the
    manifest: no data file is read)."""
    return sum(f.metadata.physical_rows < SMALL_ROWS for f in fragments)


def compact(table) -> int:
    """Merge the LanceDB ``table``'s small fragments when it holds :data:`MAX_SMALL` of them
    or more; the number of fragments merged away (0: nothing written, no new version)."""
    try:
        dataset = table.to_lance()
    except ImportError:  # no pylance: fragments are left to ``qortex snapshots prune``
        return 0
    fragments = dataset.get_fragments()
    small = small_fragments(fragments)
    if small < MAX_SMALL:
        return 0
    before = len(fragments)
    # deletions alone make no fragment a candidate: a large one would be cut into small ones
    dataset.optimize.compact_files(target_rows_per_fragment=SMALL_ROWS, materialize_deletions=False)
    table.checkout_latest()  # the version written through pylance
    merged = before - len(table.to_lance().get_fragments())
    _log.info("compacted %s: %d small fragments, %d fewer", table.name, small, merged)
    return max(merged, 0)
