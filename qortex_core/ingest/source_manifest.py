"""The source folder's manifest: each document file's size, mtime and inode as they were when it
was last read, so a run reads (and digests) only the files whose stat changed.

A file is trusted unchanged, and not read, when its ``(size, mtime_ns, inode)`` equal the
manifest's, the source settings (domain, size cap, redaction) are the same, the documents table
still holds the document with the signature read then, and the file's mtime lies at least
:data:`RACY_NS` before that read began: a file written within the clock's granularity of being
read could change again without moving its mtime (git's "racy clean" rule), so it is read once
more on the next run. Anything else is read and its digest compared, as before.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from qortex_core.ingest.documents import (
    DOCUMENTS,
    DocumentSet,
    SourceConfig,
    document_signature,
    load_documents,
    stored_signatures,
)
from qortex_core.storage import ids
from qortex_core.storage.store import LanceStore

MANIFEST = "source_manifest"
RACY_NS = 2_000_000_000  # a file modified this close to its read is read again next run


def settings_digest(config: SourceConfig) -> str:
    """What else a document depends on than its bytes and path: the source root, its domain
    rule, the size cap and the redaction settings."""
    redaction = json.dumps(asdict(config.redaction), sort_keys=True, default=list)
    root = str(Path(config.root).resolve())
    return ids.digest(root, config.domain, config.default_domain, str(config.max_bytes), redaction)


@dataclass
class _Trust:
    """The ``known`` callback of :func:`load_documents` over one manifest; it remembers the stat
    taken before each read (the one to record: a file changed after it is read again next
    run)."""

    manifest: dict[str, dict]
    signatures: dict[str, str]
    settings: str
    stats: dict[str, os.stat_result] = field(default_factory=dict)

    def __call__(self, path: Path, doc_id: str) -> str | None:
        try:
            st = os.stat(path)  # a listed symlink inside the root: its target's stat
        except OSError:
            return None  # the read reports why
        self.stats[doc_id] = st
        row = self.manifest.get(doc_id)
        stat = (st.st_size, st.st_mtime_ns, st.st_ino)
        if (
            row is None
            or row["settings"] != self.settings
            or (row["size"], row["mtime_ns"], row["inode"]) != stat
            or st.st_mtime_ns >= row["read_ns"] - RACY_NS
            or self.signatures.get(doc_id) != row["signature"]
        ):
            return None
        return row["content_hash"]


@dataclass(frozen=True)
class SourceScan:
    """A scan's documents (read and kept) and what the manifest must record of the read ones."""

    found: DocumentSet
    stamps: pa.Table  # manifest rows of the documents read


def _manifest(store: LanceStore) -> dict[str, dict]:
    rows = store.read(MANIFEST)
    return {r["id"]: r for r in rows.to_pylist()} if rows.num_rows else {}


def scan_documents(store: LanceStore, config: SourceConfig) -> SourceScan:
    """:func:`load_documents` reading only the files whose stat moved since the manifest
    recorded them; the others' ids land in ``found.kept``.

    Raises:
        DatasetError: the root is neither a directory nor a file.
    """
    started = time.time_ns()
    trust = _Trust(_manifest(store), stored_signatures(store), settings_digest(config))
    found = load_documents(config, trust)
    read = [d for d in found.documents if d.doc_id in trust.stats and not d.skipped_entries]
    stats = [trust.stats[d.doc_id] for d in read]
    stamps = pa.table(
        {
            "id": pa.array([d.doc_id for d in read], pa.string()),
            "size": pa.array([s.st_size for s in stats], pa.int64()),
            "mtime_ns": pa.array([s.st_mtime_ns for s in stats], pa.int64()),
            "inode": pa.array([s.st_ino for s in stats], pa.int64()),
            "read_ns": pa.array([started] * len(read), pa.int64()),
            "content_hash": pa.array([d.content_hash for d in read], pa.string()),
            "signature": pa.array([document_signature(d) for d in read], pa.string()),
            "settings": pa.array([trust.settings] * len(read), pa.string()),
        }
    )
    return SourceScan(found, stamps)


def record_manifest(store: LanceStore, scan: SourceScan, deleted: tuple[str, ...]) -> None:
    """Record the files read by ``scan`` (after the documents table holds them) and forget the
    deleted documents' rows."""
    store.upsert(MANIFEST, scan.stamps)
    store.delete(MANIFEST, "id", list(deleted))


def stored_file_ids(store: LanceStore) -> tuple[str, ...]:
    """The ids of the file documents stored (kept as they are when no source folder is given)."""
    rows = store.read_columns(DOCUMENTS, ["id", "kind"])
    if not rows.num_rows:
        return ()
    ids_, kinds = rows["id"].to_pylist(), rows["kind"].to_pylist()
    return tuple(sorted(i for i, k in zip(ids_, kinds) if k != "memory"))
