"""Source documents: loading a directory of ``.md``, ``.txt`` and HippoRAG corpus files, and
tracking changes.

A document is one file. A text file has one section (its body); a corpus file
(``.json`` list or ``.jsonl`` lines of ``{title, text}``) has one section per
entry. The first-level folder under the root is the document's domain unless a
fixed domain is configured. Files that cannot be used are skipped with a
recorded reason, never silently.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

import pyarrow as pa

from qortex_core.errors import DatasetError
from qortex_core.ingest.source_listing import Listing, Skipped, list_one, list_tree
from qortex_core.redact import RedactionConfig, redact
from qortex_core.storage import id_keys, times
from qortex_core.storage.source_files import check_text, load_json, read_source
from qortex_core.storage.store import LanceStore

DOCUMENTS = "documents"
TEXT_SUFFIXES = (".md", ".txt")
CORPUS_SUFFIXES = (".json", ".jsonl")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class SourceConfig:
    """Where documents come from and how they get a domain.

    Attributes:
        root: the source directory.
        domain: a fixed domain for every document; empty: the first-level folder.
        default_domain: domain of files directly under the root.
        max_bytes: larger files are skipped.
    """

    root: Path
    domain: str = ""
    default_domain: str = "default"
    max_bytes: int = 256 * 1024 * 1024
    redaction: RedactionConfig = RedactionConfig()  # secrets removed from text as it is read


@dataclass(frozen=True)
class Section:
    """A titled piece of text inside a document: a file body or one corpus entry."""

    title: str
    text: str
    time: str | None = (
        None  # event time, ISO 8601 UTC (a corpus entry's date, else the file's mtime)
    )


@dataclass(frozen=True)
class Document:
    """One source file, its domain, its sections and a hash of its bytes."""

    doc_id: str
    domain: str
    kind: str  # "text" or "corpus"
    sections: tuple[Section, ...]
    content_hash: str
    skipped_entries: tuple[str, ...] = ()  # corpus entries left out, each with its reason


@dataclass(frozen=True)
class DocumentSet:
    """The documents found under a root and the files skipped; ``kept``: ids of documents whose
    files a manifest showed unchanged, so they were not read (:mod:`.source_manifest`)."""

    documents: tuple[Document, ...]
    skipped: tuple[Skipped, ...]
    kept: tuple[str, ...] = ()


Known = Callable[[Listing], Mapping[str, str]]  # the listing -> {relative path: stored hash}


# -- scanning ----------------------------------------------------------------------------
def not_found(source: Path | str) -> str:
    """The one line for a source that is neither a folder nor a file."""
    return f"source not found: {source} (give a folder, or one .md, .txt, .json or .jsonl file)"


def list_source(config: SourceConfig) -> Listing:
    """The candidate files of ``config.root`` (a folder, or one file: its folder is the root).

    Raises:
        DatasetError: the root is neither a directory nor a file.
    """
    root = Path(config.root)
    if root.is_file():
        return list_one(root, TEXT_SUFFIXES + CORPUS_SUFFIXES)
    if root.is_dir():
        return list_tree(root, TEXT_SUFFIXES + CORPUS_SUFFIXES)
    raise DatasetError(not_found(root))


def fingerprint(config: SourceConfig) -> str:
    """Hash of the file listing with sizes and modification times: changes when any source
    changes.

    Raises:
        DatasetError: the root is neither a directory nor a file.
    """
    h = hashlib.blake2b(digest_size=16)
    for file in list_source(config).files:
        if file.stat is None:  # vanished since the folder was read
            continue
        h.update(
            f"{file.rel}\0{file.stat.st_size}\0{file.stat.st_mtime_ns}\n".encode(
                "utf-8", "surrogatepass"
            )
        )
    return h.hexdigest()


# -- parsing ------------------------------------------------------------------------------
def _decode(raw: bytes) -> str:
    if b"\x00" in raw[:8192]:
        raise ValueError("binary file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("binary or not UTF-8 text") from None


def _text_sections(path: Path, text: str, when: str | None = None) -> tuple[Section, ...]:
    """One section: the title is a leading markdown H1 (else the file name); paragraphs kept, spaces
    collapsed."""
    title = " ".join(path.stem.replace("_", " ").replace("-", " ").split())
    markdown = path.suffix.lower() == ".md"
    body = text.strip()
    first = body.splitlines()[0] if body else ""
    heading = _HEADING.match(first) if markdown and first.lstrip().startswith("# ") else None
    if heading:
        title = heading.group(1).strip() or title
        body = body[len(first) :]
    paragraphs = []
    for block in re.split(r"\n\s*\n", body):
        lines = [
            (m.group(1) if markdown and (m := _HEADING.match(x)) else x) for x in block.splitlines()
        ]
        para = " ".join(" ".join(lines).split())
        if para:
            paragraphs.append(para)
    return (Section(title, "\n\n".join(paragraphs), when),) if paragraphs else ()


def _entry_time(row: dict, n: int, default: str | None) -> str | None:
    """A corpus entry's event time: its first date field (``times.DATE_FIELDS``), else default."""
    for name in times.DATE_FIELDS:
        if row.get(name) not in (None, ""):
            try:
                return times.parse_time(row[name])
            except ValueError as exc:
                raise ValueError(f"corpus entry {n}: '{name}' {exc}") from None
    return default


def _corpus_sections(
    path: Path, text: str, when: str | None = None
) -> tuple[tuple[Section, ...], list[str]]:
    """Sections of a HippoRAG corpus: a JSON list (or JSON lines) of ``{title, text}``, each
    entry's event time from a date field (``time``, ``date``, ...) else ``when``; and the
    entries left out for a bad time, each with its reason (the rest still loads)."""
    rows = (
        load_json(text)
        if path.suffix.lower() == ".json"
        else [load_json(x) for x in text.splitlines() if x.strip()]
    )
    if not isinstance(rows, list):
        raise ValueError("a corpus file must hold a JSON list of {title, text}")
    out, left_out = [], []
    for n, row in enumerate(rows):
        if (
            not isinstance(row, dict)
            or not isinstance(row.get("text"), str)
            or not isinstance(row.get("title", ""), str)
        ):
            raise ValueError(f"corpus entry {n} needs string 'title' and 'text'")
        if row["text"].strip():
            title = check_text(row.get("title", ""), f"corpus entry {n}'s title")
            body = check_text(row["text"], f"corpus entry {n}'s text")
            try:
                out.append(Section(title, body, _entry_time(row, n, when)))
            except ValueError as exc:
                left_out.append(str(exc))
    if not out and left_out:  # nothing left: the file is skipped for its first bad entry
        raise ValueError(left_out[0])
    return tuple(out), left_out


def _domain(rel: Path, config: SourceConfig) -> str:
    if config.domain:
        return config.domain
    return rel.parts[0] if len(rel.parts) > 1 else config.default_domain


def read_document(
    path: Path, config: SourceConfig, listed: tuple[int, int] | None = None
) -> Document:
    """Load one file (``listed``: its device and inode when it was listed).

    Raises:
        ValueError: the file is unreadable, binary, empty, too large, a malformed corpus, a
            symlink or another file than the one listed, or outside the root.
    """
    root = Path(config.root)
    # never blocks on a FIFO, never follows a symlink swapped in, bounded read
    source = read_source(root, path, config.max_bytes, listed)
    raw, when = source.data, _file_time(source.mtime)
    text = _decode(raw)
    if not text.strip():
        raise ValueError("empty file")
    corpus = path.suffix.lower() in CORPUS_SUFFIXES
    rel = path.relative_to(root)
    named = path.with_name(safe_name(path.name, config))
    sections, left_out = (
        _corpus_sections(path, text, when)
        if corpus
        else (_text_sections(named, redact(text, config.redaction), when), [])
    )
    if corpus:  # redacted after decoding: JSON escapes (\/, \u0041) cannot hide a secret
        redacted = (
            Section(redact(s.title, config.redaction), redact(s.text, config.redaction), s.time)
            for s in sections
        )
        sections = tuple(redacted)
    if not sections:
        raise ValueError("no text")
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    doc_id = safe_name(rel.as_posix(), config)
    kind = "corpus" if corpus else "text"
    return Document(doc_id, _domain(rel, config), kind, sections, digest, tuple(left_out))


def _file_time(mtime: float) -> str | None:
    """A file's modification time as its event time (None when outside years 1000-9999)."""
    try:
        return times.from_epoch(mtime)
    except ValueError:
        return None


def safe_name(name: str, config: SourceConfig) -> str:
    """``name`` (a file name or relative path) with secrets redacted.

    A redacted name gets 8 hex digits of its original's hash, so two files stay two documents.
    """
    clean = redact(name, config.redaction)
    if clean == name:
        return name
    return f"{clean}~{hashlib.blake2b(name.encode(), digest_size=4).hexdigest()}"


def load_documents(config: SourceConfig, known: Known | None = None) -> DocumentSet:
    """Every usable document under ``config.root``, sorted by id, and the files skipped; a
    root that is a file is a source of that one file (its folder is the root).

    Args:
        config: the source.
        known: given the listing, the files known unchanged (relative path -> the content hash
            stored for it); they are not read: their ids land in ``kept``.

    Raises:
        DatasetError: the root is neither a directory nor a file.
    """
    listing = list_source(config)
    config = replace(config, root=listing.root)
    trusted = known(listing) if known is not None else {}
    skipped, documents, kept = list(listing.skipped), [], []
    first_with: dict[str, str] = {}  # content hash -> the first file (sorted order) with it
    for file in listing.files:
        stored = trusted.get(file.rel)
        if stored is not None:  # unchanged since it was read: its stored hash stands for it
            if stored in first_with:
                skipped.append(Skipped(file.rel, f"duplicate of {first_with[stored]}"))
            else:
                first_with[stored] = file.rel  # a manifest id is its file's safe name
                kept.append(file.rel)
            continue
        stat = file.stat
        try:
            path = Path(file.path)
            doc = read_document(path, config, (stat.st_dev, stat.st_ino) if stat else None)
        except ValueError as exc:
            skipped.append(Skipped(file.rel, str(exc)))
            continue
        if doc.content_hash in first_with:
            skipped.append(Skipped(doc.doc_id, f"duplicate of {first_with[doc.content_hash]}"))
            continue
        first_with[doc.content_hash] = doc.doc_id
        documents.append(doc)
        skipped += [Skipped(doc.doc_id, reason) for reason in doc.skipped_entries]
    skipped = [
        Skipped(safe_name(s.path, config), redact(s.reason, config.redaction)) for s in skipped
    ]
    ordered = tuple(sorted(skipped, key=lambda s: s.path))
    return DocumentSet(tuple(documents), ordered, tuple(kept))


# -- change tracking in the store ---------------------------------------------------------
@dataclass(frozen=True)
class DocumentReport:
    """What changed since the documents were last synced."""

    total: int
    new: tuple[str, ...]
    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    unchanged: int


def document_signature(doc: Document) -> str:
    return f"{doc.content_hash}/{doc.domain}"


def _to_table(docs: list[Document]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([d.doc_id for d in docs], pa.string()),
            "domain": pa.array([d.domain for d in docs], pa.string()),
            "kind": pa.array([d.kind for d in docs], pa.string()),
            "content_hash": pa.array([d.content_hash for d in docs], pa.string()),
            "signature": pa.array([document_signature(d) for d in docs], pa.string()),
            "sections": pa.array(
                [
                    json.dumps([[s.title, s.text, s.time] for s in d.sections], ensure_ascii=False)
                    for d in docs
                ],
                pa.string(),
            ),
        }
    )


def sync_documents(
    store: LanceStore,
    documents: tuple[Document, ...] | list[Document],
    kept: tuple[str, ...] | list[str] = (),
) -> DocumentReport:
    """Make the documents table hold exactly ``documents`` and the stored documents ``kept``
    (unchanged, not read again): write new and changed ones, delete the rest. The stored ids
    are compared as arrays: ``kept`` is every unchanged file of a large folder."""
    before = store.read_columns(DOCUMENTS, ["id", "signature"])
    if not before.num_rows:
        before = pa.table({"id": pa.array([], pa.string()), "signature": pa.array([], pa.string())})
    read = {d.doc_id: d for d in documents}
    read_ids = pa.array(list(read), pa.string())
    at = id_keys.index_in(read_ids, before["id"])  # (read,) stored row, -1 new
    held = [k for k, i in zip(read, at.tolist()) if i >= 0]  # read again, stored before
    was = before["signature"].take(pa.array(at[at >= 0])).to_pylist()
    new = sorted(k for k, i in zip(read, at.tolist()) if i < 0)
    changed = sorted(k for k, sig in zip(held, was) if sig != document_signature(read[k]))
    now = id_keys.is_in(before["id"], pa.array(list(kept), pa.string())) | (
        id_keys.is_in(before["id"], read_ids)
    )  # (stored,) kept or read again
    deleted = sorted(before["id"].filter(pa.array(~now)).to_pylist())
    writes = [read[k] for k in new + changed]
    if writes:
        store.upsert(DOCUMENTS, _to_table(writes))
    store.delete(DOCUMENTS, "id", deleted)
    total = int(now.sum()) + len(new)
    return DocumentReport(
        total, tuple(new), tuple(changed), tuple(deleted), total - len(new) - len(changed)
    )


def read_stored_documents(store: LanceStore, only: list[str] | None = None) -> list[Document]:
    """The documents table as :class:`Document` objects, sorted by id (``only``: just these
    ids' rows are decoded)."""
    rows = store.read(DOCUMENTS) if only is None else store.read_where(DOCUMENTS, "id", only)
    if rows.num_rows == 0:
        return []
    out = [
        Document(
            r["id"],
            r["domain"],
            r["kind"],
            tuple(Section(*row[:3]) for row in json.loads(r["sections"])),  # time: None if old
            r["content_hash"],
        )
        for r in rows.to_pylist()
    ]
    return sorted(out, key=lambda d: d.doc_id)
