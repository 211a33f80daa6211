"""``qortex bench snapshot``: the graph_snapshot stage alone, on a home that has a snapshot: a
full build (no base) against incremental builds on the latest snapshot, with no row new, in
one run; wall and processor seconds, their ratio, and whether both published the same files
(an array kept as segments: the same rows)."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from qortex_bench.ppr_bench import reset_peak, rss_mb
from qortex_core.errors import ConfigError

if TYPE_CHECKING:
    from qortex_core.ingest.snapshot_stage import SnapshotReport


@dataclass(frozen=True)
class SnapshotBenchConfig:
    home: Path
    repeat: int = 2


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _graph_config(recorded: dict):
    """The home's own graph settings, as its latest manifest records them."""
    from qortex_core.ingest.cells import FactCellsConfig
    from qortex_core.ingest.graph import GraphConfig
    from qortex_core.ingest.sequence import SequenceConfig

    return GraphConfig(
        fact_weight=recorded["fact_weight"],
        passage_weight=recorded["passage_weight"],
        synonym_scale=recorded["synonym_scale"],
        relation_weights=tuple((str(r), float(w)) for r, w in recorded["relation_weights"]),
        sequence=SequenceConfig(**recorded["sequence"]),
        fact_cells=FactCellsConfig(**recorded["fact_cells"]),
    )


def _written_bytes() -> int | None:
    """Bytes this process has passed to ``write`` so far (``wchar`` of /proc/self/io: the page
    cache's writes too, which reach the disk later); None where /proc does not say."""
    try:
        for line in open("/proc/self/io"):
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _timed(build: Callable[[], SnapshotReport]) -> dict:
    """One build's wall and processor seconds, its peak RSS (``VmHWM``, reset before it:
    anonymous memory and the mapped files it touched; None where /proc cannot reset it) and
    the MiB it wrote (LanceDB's writes too: the full-text sync's)."""
    peak_ok = reset_peak()
    wall, cpu, wrote = time.perf_counter(), _cpu_s(), _written_bytes()
    report = build()
    seconds, cpu_s, now = time.perf_counter() - wall, _cpu_s() - cpu, _written_bytes()
    return {
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu_s, 3),
        "peak_rss_mib": round(rss_mb("VmHWM")) if peak_ok else None,
        "written_mib": None if wrote is None or now is None else round((now - wrote) / 2**20, 1),
        "mode": report.mode,
        "name": report.name,
    }


def _same(home: Path, full: str, merged: str) -> bool:
    """Whether snapshot ``merged`` published what ``full`` did: the same files (checksums),
    but for an array or table kept as segments (``storage/segmented_rows.py``,
    ``storage/segmented_table.py``), which must hold the full build's rows."""
    from qortex_core.storage import snapshot as snap

    a, b = snap.load(home, full), snap.load(home, merged)
    split = set(b.manifest.get("segments", {}))
    joined = set(b.manifest.get("table_segments", {}))  # tables kept so (segmented_table.py)
    apart = split | joined
    mine = {k: v for k, v in a.manifest["files"].items() if k.rsplit(".", 1)[0] not in apart}
    theirs = {k: v for k, v in b.manifest["files"].items() if k.split("-")[0] not in apart}
    if mine != theirs or not all(a.tables[n].equals(b.tables[n]) for n in joined):
        return False
    step = 1 << 20
    return all(
        a.arrays[n].shape == b.arrays[n].shape
        and all(
            np.array_equal(a.arrays[n][s : s + step], b.arrays[n][s : s + step])
            for s in range(0, len(a.arrays[n]), step)
        )
        for n in split
    )


def run_snapshot_bench(config: SnapshotBenchConfig) -> dict:
    """Build the home's snapshot in full once, then ``repeat`` times on the latest as base.

    Raises:
        ConfigError: ``repeat`` is below 1.
        SnapshotError: the home has no usable snapshot.
    """
    from qortex_core.ingest.snapshot_stage import build_snapshot
    from qortex_core.storage import snapshot as snap
    from qortex_core.storage.store import LanceStore

    if config.repeat < 1:
        raise ConfigError("--repeat must be at least 1")
    store, home = LanceStore.open(config.home), config.home
    manifest = snap.load(home).manifest
    params = {k: v for k, v in manifest["params"].items() if k != "graph"}
    spec = (manifest["embedding_model"], _graph_config(manifest["params"]["graph"]), params)
    keep = config.repeat + 1  # every build of this run stays until the files are compared

    def build(merge_base: bool) -> SnapshotReport:
        return build_snapshot(store, home, *spec, force=True, keep=keep, merge_base=merge_base)

    full = _timed(lambda: build(False))
    merged = [_timed(lambda: build(True)) for _ in range(config.repeat)]
    same = all(_same(home, full["name"], m["name"]) for m in merged)
    best = min(m["seconds"] for m in merged)
    return {
        "home": str(home),
        "counts": manifest.get("counts", {}),
        "full": full,
        "incremental": merged,
        "incremental_ratio": round(best / full["seconds"], 4) if full["seconds"] else None,
        "same_files": same,
    }
