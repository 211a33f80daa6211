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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.documents import (
    DOCUMENTS,
    DocumentSet,
    SourceConfig,
    document_signature,
    load_documents,
    safe_name,
)
from qortex_core.ingest.source_listing import Listed, Listing
from qortex_core.storage import id_keys, ids
from qortex_core.storage.arrow_access import equal_at
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
    """The ``known`` callback of :func:`load_documents` over one manifest: the listed files whose
    stat matches the manifest, found by two hash lookups and array compares (no per-file
    Python work); it keeps the listed files not trusted, whose stat (taken before any read) is
    the one to record for the files read."""

    manifest: pa.Table
    signatures: pa.Table
    settings: str
    trusted: dict[str, str] = field(default_factory=dict)
    unread: list[Listed] = field(default_factory=list)  # listed with a stat, not trusted

    def __call__(self, listing: Listing) -> dict[str, str]:
        listed = [f for f in listing.files if f.stat is not None]
        self.trusted, self.unread = {}, listed
        if self.manifest.num_rows and self.signatures.num_rows and listed:
            keep, self.trusted = self._match(_stamped(listed))
            unread = np.ones(len(listed), bool)
            unread[keep] = False
            self.unread = [listed[i] for i in np.flatnonzero(unread)]
        return self.trusted

    def _match(self, files: pa.Table) -> tuple[np.ndarray, dict[str, str]]:
        """The rows of ``files`` trusted unchanged, and their ids -> stored content hashes."""
        held = self.manifest.filter(pc.equal(self.manifest["settings"], self.settings))
        at = id_keys.index_in(files["id"], held["id"])  # (files,) manifest row, -1 none
        signed = id_keys.index_in(files["id"], self.signatures["id"])  # (files,) document row
        ok = (at >= 0) & (signed >= 0)
        row, doc = at[ok], signed[ok]
        keep = np.flatnonzero(ok)[
            (_column(held, "size")[row] == _column(files, "size")[ok])
            & (_column(held, "mtime_ns")[row] == _column(files, "mtime_ns")[ok])
            & (_column(held, "inode")[row] == _column(files, "inode")[ok])
            & (_column(held, "read_ns")[row] - RACY_NS > _column(files, "mtime_ns")[ok])
            & equal_at(held["signature"], row, self.signatures["stored_signature"], doc)
        ]
        kept_ids = files["id"].take(pa.array(keep)).to_pylist()
        hashes = held["content_hash"].take(pa.array(at[keep])).to_pylist()
        return keep, dict(zip(kept_ids, hashes))

    def stats(self, config: SourceConfig) -> dict[str, os.stat_result]:
        """The stat of each listed file not trusted unchanged (the files read), by its document
        id (its relative path made safe)."""
        return {safe_name(f.rel, config): f.stat for f in self.unread if f.stat is not None}


def _stamped(files: list[Listed]) -> pa.Table:
    """The listed files' relative paths with the size, mtime and inode the listing saw."""
    stats = [f.stat for f in files]
    return pa.table(
        {
            "id": pa.array([f.rel for f in files], pa.string()),
            "size": pa.array([s.st_size for s in stats], pa.int64()),  # type: ignore[union-attr]
            "mtime_ns": pa.array([s.st_mtime_ns for s in stats], pa.int64()),  # type: ignore[union-attr]
            "inode": pa.array([s.st_ino for s in stats], pa.int64()),  # type: ignore[union-attr]
        }
    )


def _column(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(table[name].to_numpy(), np.int64)


@dataclass(frozen=True)
class SourceScan:
    """A scan's documents (read and kept) and what the manifest must record of the read ones."""

    found: DocumentSet
    stamps: pa.Table  # manifest rows of the documents read


def _signatures(store: LanceStore) -> pa.Table:
    """The stored documents' ids and signatures (``stored_signature``), not their text."""
    rows = store.read_columns(DOCUMENTS, ["id", "signature"])
    if not rows.num_rows:
        return pa.table({})
    return rows.rename_columns(["id", "stored_signature"])


def scan_documents(store: LanceStore, config: SourceConfig) -> SourceScan:
    """:func:`load_documents` reading only the files whose stat moved since the manifest
    recorded them; the others' ids land in ``found.kept``.

    Raises:
        DatasetError: the root is neither a directory nor a file.
    """
    started = time.time_ns()
    trust = _Trust(store.read(MANIFEST), _signatures(store), settings_digest(config))
    found = load_documents(config, trust)
    read = [d for d in found.documents if not d.skipped_entries]
    by_id = trust.stats(config) if read else {}
    read = [d for d in read if d.doc_id in by_id]
    stats = [by_id[d.doc_id] for d in read]
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
