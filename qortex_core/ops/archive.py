"""``qortex export``: a home's records of truth as one JSON Lines file (``qortex import`` reads it).

What is written: every revision of every memory (with its stored vector, so a restored home
searches the same before it is consolidated), the file documents (their sections: a restored
home consolidates without the source folder), the feedback events, the teleportation factors,
and the successful extractions (the extractor's output, LLM or recorded: consolidating the
restored home with the same extractor makes no extraction call). Everything else (chunks,
embeddings, synonyms, snapshots) is derived, and ``qortex consolidate`` rebuilds it.

Why JSON Lines rather than Parquet: an export is a backup and an interchange file. One JSON
object per line is read by anything (``jq``, ``grep``, a few lines of any language, mem0 or Letta
import scripts), streams in constant memory, diffs line by line, and a bad line is reported by
its number. Parquet would be smaller and typed, but it needs an Arrow reader to look inside,
and the tables here are small beside the derived ones. Vectors are base64 of little-endian
float32 (exact, and a third of the size of decimal floats). A name ending in ``.gz`` is gzipped.

Layout: line 1 is the header (``format``, ``version``, ``created``, ``tables``), then one line
per row ``{"table": NAME, "row": {...}}``, and a last line ``{"end": {table: rows}}``: a file
cut short has no end line and is refused whole.
"""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.jsonable import JsonRecord
from qortex_core.memory.records import JSON_COLUMN, MEMORIES
from qortex_core.storage.store import (
    EXTRACTIONS,
    FACTORS,
    FEEDBACK_EVENTS,
    LanceStore,
    arrow_to_vectors,
    vector_type,
)

FORMAT = "qortex-export"
VERSION = 1
MEMORY_TEXT = (
    "key", "id", "op", "text", "time", "created_at", "source", "domain", "metadata", "writer",
    "target", "model",
)  # fmt: skip
TABLES = (DOCUMENTS, EXTRACTIONS, MEMORIES, FEEDBACK_EVENTS, FACTORS)  # the order of commit


@dataclass(frozen=True)
class ExportReport(JsonRecord):
    """What :func:`export_home` wrote: rows per table, the file and its size in bytes."""

    path: str
    rows: dict[str, int]
    bytes: int


def open_text(path: Path, mode: str, gzipped: bool | None = None) -> IO[str]:
    """``path`` as UTF-8 text, gzipped when ``gzipped`` (None: when its name ends in ``.gz``)."""
    if path.name.endswith(".gz") if gzipped is None else gzipped:
        return cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return open(path, mode, encoding="utf-8")


def encode_vector(vector: np.ndarray) -> str:
    """A float32 vector as base64 of its little-endian bytes."""
    return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")


def _iso(value: object) -> object:
    """Datetimes as ISO 8601 text; anything else as it is."""
    return value.isoformat() if isinstance(value, dt.datetime) else value


def table_rows(store: LanceStore, name: str) -> Iterator[dict]:
    """The rows of ``name`` to export, JSON-ready (file documents only; ok extractions only)."""
    table = store.read(name)
    if table.num_rows == 0:
        return
    if name == DOCUMENTS:  # a memory's document is made from the memories table
        table = table.filter(pc.not_equal(table["kind"], "memory"))
    elif name == EXTRACTIONS:
        table = table.filter(pc.equal(table["status"], "ok"))
    vectors = None
    if name == MEMORIES:
        dim = table.schema.field("vector").type.list_size
        vectors = arrow_to_vectors(table["vector"], dim)  # (n, d)
        derived = [c for c in ("vector", JSON_COLUMN) if c in table.column_names]
        table = table.drop_columns(derived)  # the JSON copy of the metadata is made on import
    for i, row in enumerate(table.to_pylist()):
        out = {k: _iso(v) for k, v in row.items()}
        if vectors is not None:
            out["vector"] = encode_vector(vectors[i])
        yield out


def export_home(home: str | Path, out: Path) -> ExportReport:
    """Write the records of ``home`` to ``out`` (written beside it, then renamed into place:
    ``out`` is the whole export or is left as it was).

    Raises:
        HomeError: a table is unreadable; OSError: ``out`` cannot be written.
    """
    store = LanceStore.open_reader(home)
    staged = out.with_name(out.name + ".partial")
    rows = dict.fromkeys(TABLES, 0)
    try:
        with open_text(staged, "w", gzipped=out.name.endswith(".gz")) as sink:
            header = {"format": FORMAT, "version": VERSION, "tables": list(TABLES)}
            header["created"] = dt.datetime.now(dt.timezone.utc).isoformat()
            sink.write(json.dumps(header) + "\n")
            for name in TABLES:
                for row in table_rows(store, name):
                    sink.write(json.dumps({"table": name, "row": row}, ensure_ascii=False) + "\n")
                    rows[name] += 1
            sink.write(json.dumps({"end": rows}) + "\n")
        staged.replace(out)  # after the file is closed whole
    finally:
        staged.unlink(missing_ok=True)
    return ExportReport(str(out), rows, out.stat().st_size)


def empty_like(name: str, dim: int = 0) -> pa.Schema:
    """The Arrow schema rows of ``name`` are imported with (``dim``: the memories' vectors)."""
    from qortex_core.feedback.events import EVENT_SCHEMA
    from qortex_core.feedback.factors import FACTOR_SCHEMA

    if name == MEMORIES:  # as :func:`~qortex_core.memory.records.revision_rows` writes them
        text = [(c, pa.string()) for c in MEMORY_TEXT]
        return pa.schema(
            text[:2] + [("revision", pa.int64())] + text[2:] + [("vector", vector_type(dim))]
        )
    if name == FEEDBACK_EVENTS:
        return EVENT_SCHEMA
    if name == FACTORS:
        return FACTOR_SCHEMA
    columns = {
        DOCUMENTS: ("id", "domain", "kind", "content_hash", "signature", "sections"),
        EXTRACTIONS: ("key", "passage_id", "extractor", "status", "error", "payload"),
    }[name]
    return pa.schema([(c, pa.string()) for c in columns])
