"""The probe's verdict remembered per published snapshot: the ``snapshot_answers_probe`` check
gives the verdict of the probe that snapshot already passed (the graph_snapshot stage's gate, or
an earlier run of the check) instead of loading it and querying it again.

A verdict is keyed by the snapshot's name, its manifest file (size, mtime, inode: a snapshot
folder written again under the same name is probed again) and the embedder's name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from qortex_core.embed import Embedder
from qortex_core.errors import QortexError
from qortex_core.ingest.stage_inputs import remember, remembered, upstream_marks
from qortex_core.ops.doctor import DoctorConfig, check_probe
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore

PROBE_MEMO = "snapshot_probe"


def published(home: Path, name: str | None = None) -> tuple[str, str] | None:
    """Snapshot ``name`` (default: the one ``LATEST`` names) and its manifest file's stat
    (None: it cannot be read)."""
    try:
        name = snap.latest_name(home) if name is None else name
        st = (snap.snapshots_dir(home) / name / "manifest.json").stat()
    except (QortexError, OSError):
        return None
    return name, f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def recorder(store: LanceStore, home: Path, embedder: Embedder) -> Callable[[str, str], None]:
    """An ``on_pass`` for :func:`qortex_core.ops.doctor.probe_gate`: the pass of snapshot
    ``name`` is remembered as its probe's verdict."""

    def record(name: str, detail: str) -> None:
        parts = published(home, name)
        if parts is not None:
            marks = upstream_marks(store, (), *parts, embedder.name)
            remember(store, PROBE_MEMO, marks, [True, detail])

    return record


def remembered_probe(store: LanceStore, home: Path, embedder: Embedder) -> tuple[bool, str]:
    """The probe's verdict on the latest snapshot and its detail, run again only when ``LATEST``
    names another snapshot, that snapshot's manifest file is not the one that passed, or the
    embedder changed (a failure is never remembered)."""

    def probe() -> list:
        check = check_probe(home, embedder, DoctorConfig(probe_embeds=False))
        return [check.ok, check.detail]

    parts = published(home)
    if parts is None:  # nothing to remember it by: the probe says what is wrong
        ok, detail = probe()
        return bool(ok), str(detail)
    ok, detail = remembered(store, PROBE_MEMO, (), probe, *parts, embedder.name, keep=_passed)
    return bool(ok), str(detail)


def _passed(verdict: list) -> bool:
    return bool(verdict[0])
