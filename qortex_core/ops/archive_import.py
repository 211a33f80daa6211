"""``qortex import``: an export file (:mod:`qortex_core.ops.archive`) merged into a home.

Staged, then committed: the whole file is read and checked first (every line, field and type,
the header, the end line that proves the file whole), and a bad file is refused with one line
naming its line number before anything is written. Then each table gets the rows it lacks:

- memories by row key, and never a second row for a (record id, revision) the home holds (a
  revision written differently on both sides counts as a conflict; the home's own is kept;
  ``supersede`` link rows, which the library may write more than once, go by key alone), in
  one append under the records lock;
- documents by id, extractions by key, feedback events by event id;
- factors: copied as they are when the home had no feedback before, else re-folded from all
  the events (the factors are a view of the events).

Importing the same file twice adds nothing. Then ``qortex consolidate`` builds the graph.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import DatasetError
from qortex_core.feedback.events import KINDS
from qortex_core.ingest.documents import DOCUMENTS
from qortex_core.jsonable import JsonRecord
from qortex_core.memory.records import MEMORIES, MemoryTable
from qortex_core.memory.timeline import LINK_OP
from qortex_core.ops.archive import FORMAT, TABLES, VERSION, empty_like, open_text
from qortex_core.storage.record_lock import records_lock
from qortex_core.storage.store import (
    EXTRACTIONS,
    FACTORS,
    FEEDBACK_EVENTS,
    LanceStore,
    vectors_to_arrow,
)
from qortex_core.storage.writer_lock import writer_lock

S, N = (str,), (str, type(None))
FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    MEMORIES: {
        "key": S, "id": S, "revision": (int,), "op": S, "text": S, "time": N, "created_at": S,
        "source": N, "domain": S, "metadata": S, "writer": S, "target": N, "model": S,
        "vector": S,
    },
    DOCUMENTS: dict.fromkeys(("id", "domain", "kind", "content_hash", "signature", "sections"), S),
    EXTRACTIONS: dict.fromkeys(("key", "passage_id", "extractor", "status", "error", "payload"), S),
    FEEDBACK_EVENTS: {
        "event_id": S, "query_id": S, "result_id": S, "kind": S, "concept_ids": (list,),
        "ts": S, "tenant": S,
    },
    FACTORS: {
        "concept_id": S, "factor": (int, float), "updated_at": S, "events": (int,),
        "watermark": (int,), "events_total": (int,),
    },
}  # fmt: skip
OPS = ("remember", "update", "forget", "merge", "merged", LINK_OP)  # what a memories row records
KEYS = {MEMORIES: "key", DOCUMENTS: "id", EXTRACTIONS: "key", FEEDBACK_EVENTS: "event_id"}


@dataclass
class Staged:
    """An export file read and checked: rows per table, and the memories' vectors."""

    rows: dict[str, list[dict]] = field(default_factory=lambda: {t: [] for t in TABLES})
    vectors: list[np.ndarray] = field(default_factory=list)


@dataclass(frozen=True)
class ImportReport(JsonRecord):
    """What :func:`import_home` did.

    Attributes:
        added: rows written per table.
        present: rows the home already held (same key), per table.
        conflicts: memory revisions the home holds written otherwise (the home's kept).
        factors: ``copied``, ``refolded`` or ``unchanged``.
    """

    path: str
    added: dict[str, int]
    present: dict[str, int]
    conflicts: int
    factors: str


def _bad(path: Path, line: int, why: str) -> DatasetError:
    return DatasetError(f"{path} line {line}: {why}; nothing was imported")


def _check_row(name: str, row: object) -> str | None:
    """What is wrong with an exported row of ``name`` (None when nothing)."""
    if not isinstance(row, dict):
        return "a row must be a JSON object"
    fields = FIELDS[name]
    if set(row) != set(fields):
        missing, extra = sorted(set(fields) - set(row)), sorted(set(row) - set(fields))
        return f"{name} row fields differ (missing {missing}, unknown {extra})"
    for key, kinds in fields.items():
        value = row[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            return f"{name}.{key} has the wrong type ({type(value).__name__})"
    return _check_values(name, row)


def _check_values(name: str, row: dict) -> str | None:
    """Value checks beyond types: ops, kinds, times, finite numbers, metadata objects."""
    try:
        if name == MEMORIES:
            assert row["op"] in OPS and row["revision"] >= 1, "an unknown op or revision"
            assert isinstance(json.loads(row["metadata"]), dict), "metadata is not an object"
            dt.datetime.fromisoformat(row["created_at"])
        elif name == FEEDBACK_EVENTS:
            assert row["kind"] in KINDS, f"an unknown feedback kind {row['kind']!r}"
            assert all(isinstance(c, str) for c in row["concept_ids"]), "a concept id not text"
            dt.datetime.fromisoformat(row["ts"])
        elif name == FACTORS:
            assert math.isfinite(row["factor"]) and row["factor"] > 0, "a factor not positive"
            dt.datetime.fromisoformat(row["updated_at"])
        elif name == DOCUMENTS:
            assert row["kind"] != "memory", "a memory's document (it is made at consolidation)"
            assert isinstance(json.loads(row["sections"]), list), "sections are not a list"
    except (AssertionError, ValueError) as exc:
        return f"{name} row: {exc or 'a bad value'}"
    return None


def _vector(row: dict, dim: int | None) -> np.ndarray:
    """The decoded vector of an exported memory row.

    Raises:
        ValueError: not base64 of float32 values, or not ``dim`` of them.
    """
    try:
        raw = base64.b64decode(row["vector"], validate=True)
    except binascii.Error:
        raise ValueError("memories.vector is not base64") from None
    if not raw or len(raw) % 4 or (dim is not None and len(raw) != 4 * dim):
        raise ValueError("memories.vector has the wrong length")
    vector = np.frombuffer(raw, "<f4").astype(np.float32)
    if not np.isfinite(vector).all():
        raise ValueError("memories.vector holds NaN or infinity")
    return vector


def read_export(path: Path) -> Staged:
    """Read and check a whole export file.

    Raises:
        DatasetError: no such file, or any line is bad (its number and why).
    """
    if not path.is_file():
        raise DatasetError(f"export file not found: {path}")
    staged, end, number = Staged(), None, 0
    try:
        with open_text(path, "r") as source:
            for number, text in enumerate(source, 1):
                if end is not None:
                    raise _bad(path, number, "lines after the end line")
                end = _read_line(path, number, text, staged)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path} cannot be read ({exc}); nothing was imported") from None
    if number == 0:
        raise DatasetError(f"{path} is empty; nothing was imported")
    counts = {t: len(r) for t, r in staged.rows.items()}
    if end is None or end != counts:
        why = "no end line (cut short?)" if end is None else f"the end line counts {end}"
        raise _bad(path, number, f"{why}, but the file holds {counts}")
    return staged


def _read_line(path: Path, number: int, text: str, staged: Staged) -> dict | None:
    """Check one line into ``staged``; returns the end line's counts, else None."""
    try:
        item = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, number, f"not JSON ({exc.msg})") from None
    if number == 1:
        if not isinstance(item, dict) or item.get("format") != FORMAT:
            raise _bad(path, number, f"not a qortex export (no {FORMAT!r} header)")
        if item.get("version") != VERSION:
            raise _bad(path, number, f"export version {item.get('version')!r} (this reads 1)")
        return None
    if isinstance(item, dict) and set(item) == {"end"}:
        if not isinstance(item["end"], dict):
            raise _bad(path, number, "the end line holds no counts")
        return item["end"]
    if not isinstance(item, dict) or set(item) != {"table", "row"} or item["table"] not in TABLES:
        raise _bad(path, number, f'expected {{"table": one of {list(TABLES)}, "row": {{...}}}}')
    problem = _check_row(item["table"], item["row"])
    if problem is None and item["table"] == MEMORIES:
        try:
            dim = staged.vectors[0].shape[0] if staged.vectors else None
            staged.vectors.append(_vector(item["row"], dim))
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        raise _bad(path, number, problem)
    staged.rows[item["table"]].append(item["row"])
    return None


def _arrow(name: str, rows: list[dict], staged: Staged) -> pa.Table:
    """Checked rows of ``name`` as an Arrow table of the home's schema."""
    if name == MEMORIES:
        dim = staged.vectors[0].shape[0] if staged.vectors else 1
        schema = empty_like(name, dim)
        plain = [{k: v for k, v in r.items() if k != "vector"} for r in rows]
        table = pa.Table.from_pylist(plain, schema=schema.remove(schema.get_field_index("vector")))
        vectors = np.stack(staged.vectors) if rows else np.zeros((0, dim), np.float32)
        return table.append_column("vector", vectors_to_arrow(vectors))
    times = {FEEDBACK_EVENTS: "ts", FACTORS: "updated_at"}.get(name)
    if times:
        rows = [dict(r, **{times: dt.datetime.fromisoformat(r[times])}) for r in rows]
    return pa.Table.from_pylist(rows, schema=empty_like(name))


def _column(store: LanceStore, name: str, column: str) -> set:
    rows = store.read_columns(name, [column]) if store.count(name) else pa.table({})
    return set(rows[column].to_pylist()) if rows.num_rows else set()


def _new_rows(store: LanceStore, name: str, table: pa.Table) -> tuple[pa.Table, int]:
    """Rows of ``table`` whose key the home lacks (the first of a repeated key), and how many
    it already held."""
    key = KEYS[name]
    held = _column(store, name, key)
    seen: set = set()
    keep = []
    for value in table[key].to_pylist():
        keep.append(value not in held and value not in seen)
        seen.add(value)
    fresh = table.filter(pa.array(keep, pa.bool_()))
    return fresh, sum(1 for v in table[key].to_pylist() if v in held)


def _merge_memories(store: LanceStore, table: pa.Table) -> tuple[int, int, int]:
    """Append the revisions the home lacks (under the records lock): (added, present,
    conflicts)."""
    with records_lock(store.config.home):
        fresh, present = _new_rows(store, MEMORIES, table)
        held = store.read_columns(MEMORIES, ["id", "revision"]) if store.count(MEMORIES) else None
        pairs = set(zip(held["id"].to_pylist(), held["revision"].to_pylist())) if held else set()
        revisions = zip(
            fresh["id"].to_pylist(), fresh["revision"].to_pylist(), fresh["op"].to_pylist()
        )
        clash = [(i, r) in pairs and op != LINK_OP for i, r, op in revisions]  # links: by key
        fresh = fresh.filter(pc.invert(pa.array(clash, pa.bool_())))
        if fresh.num_rows:
            MemoryTable(store).append(fresh)
    return fresh.num_rows, present, sum(clash)


def _factors(store: LanceStore, table: pa.Table, had_events: bool, added_events: int) -> str:
    """Copy the exported factors into a home without feedback, else re-fold the events."""
    from qortex_core.feedback.factors import update_factors

    if not had_events and store.count(FACTORS) == 0:
        if table.num_rows == 0:
            return "unchanged"
        version, total = store.latest(FEEDBACK_EVENTS)[1], store.count(FEEDBACK_EVENTS)
        n = table.num_rows
        marked = table.set_column(
            table.schema.get_field_index("watermark"),
            "watermark",
            pa.array([version] * n, pa.int64()),
        ).set_column(
            table.schema.get_field_index("events_total"),
            "events_total",
            pa.array([total] * n, pa.int64()),
        )  # the events as this home numbers them: a fold has nothing new to do
        store.replace(FACTORS, marked)
        return "copied"
    if added_events == 0:
        return "unchanged"
    update_factors(store, force=True)
    return "refolded"


def _check_home(store: LanceStore, staged: Staged, path: Path) -> None:
    """Refuse memories whose vectors are not as wide as the home's.

    Raises:
        DatasetError: the widths differ (another embedding model).
    """
    have = MemoryTable(store).dim()
    width = staged.vectors[0].shape[0] if staged.vectors else 0
    if have and width and have != width:
        raise DatasetError(
            f"{path}: its memory vectors have {width} dimensions, this home's {have} (another "
            "embedding model); nothing was imported"
        )


def import_home(home: str | Path, path: Path) -> ImportReport:
    """Merge the export file ``path`` into ``home`` (see the module docstring).

    Raises:
        DatasetError: a bad file (nothing is written); HomeBusyError: an ingest holds the home.
    """
    staged = read_export(path)
    tables = {name: _arrow(name, staged.rows[name], staged) for name in TABLES}
    store = LanceStore.open(home)
    _check_home(store, staged, path)
    added, present = dict.fromkeys(TABLES, 0), dict.fromkeys(TABLES, 0)
    conflicts = 0
    with writer_lock(home, "qortex import"):
        had_events = store.count(FEEDBACK_EVENTS) > 0
        for name in (DOCUMENTS, EXTRACTIONS, FEEDBACK_EVENTS):
            fresh, present[name] = _new_rows(store, name, tables[name])
            if fresh.num_rows and name == DOCUMENTS:
                store.upsert(name, fresh, KEYS[name])
            elif fresh.num_rows:
                store.append(name, fresh)
            added[name] = fresh.num_rows
        added[MEMORIES], present[MEMORIES], conflicts = _merge_memories(store, tables[MEMORIES])
        factors = _factors(store, tables[FACTORS], had_events, added[FEEDBACK_EVENTS])
        added[FACTORS] = tables[FACTORS].num_rows if factors == "copied" else 0
    return ImportReport(str(path), added, present, conflicts, factors)
