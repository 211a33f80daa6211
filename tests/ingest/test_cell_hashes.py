"""A fact's cell hash (ingest/snapshot_cells.id_hashes) is a function of its id alone: a column
of ids of one length (read as whole words) hashes each id as a column of mixed lengths does
(byte by byte), so a base's cells and a later build's agree however the column was made."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from qortex_core.ingest.snapshot_cells import id_hashes
from qortex_core.storage.ids import fact_id


def test_ids_of_one_length_hash_as_in_a_mixed_column() -> None:
    ids = [fact_id(f"s{i}", "r", f"o{i}") for i in range(3000)]
    alone = id_hashes(pa.chunked_array([ids[:1000], ids[1000:]]))
    mixed = id_hashes(pa.array(["x", "short_id", *ids]))  # other lengths: the byte path
    assert np.array_equal(alone, mixed[2:])
    assert len(np.unique(alone)) == len(ids)
    # an id shorter than 8 bytes is zero-padded: its hash differs from a longer one's
    assert mixed[0] != mixed[1] and id_hashes(pa.array(["x"]))[0] == mixed[0]
