"""Storage: the Store protocol and its LanceDB implementation under a data home."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.errors import HomeError, storage_error
from qortex_core.storage.folders import prepare_folder
from qortex_core.storage.sql import sql_in

CHUNKS = "chunks"
PASSAGES = "passages"
SYNONYMS = "synonym_edges"
EXTRACTIONS = "extractions"
CONCEPTS = "concepts"
FACTS = "facts"
RULES = "rules"
EMBEDDINGS = "embeddings"
FEEDBACK_EVENTS = "feedback_events"
QUERY_LOG = "query_log"
FACTORS = "teleportation_factors"
STAGE_STATE = "stage_state"
WHERE_IN_MAX = 4096  # values a filtered read (read_where) names in one Lance filter
APPEND_ATTEMPTS = 4  # an append that raced a table's creation is retried on the created table


def is_uri(home: str | Path) -> bool:
    """True for an object-store URI (``s3://bucket/prefix``), False for a local folder."""
    return "://" in str(home)


def home_of(value: str | Path) -> Path | str:
    """A data home as given: a URI (``s3://bucket/prefix``) stays a string (``Path`` would
    collapse its ``//`` into a local relative folder), a path becomes a Path."""
    text = str(value)
    return text.rstrip("/") if is_uri(text) else Path(text).expanduser()


def default_home() -> Path | str:
    """The data home: ``$QORTEX_HOME`` (a path or an object-store URI) or ``~/.qortex``."""
    from qortex_core.settings import get_settings

    return home_of(get_settings().home or Path.home() / ".qortex")


def vector_type(dim: int) -> pa.DataType:
    return pa.list_(pa.float32(), dim)


def vectors_to_arrow(vectors: np.ndarray) -> pa.FixedSizeListArray:
    """(n, d) float32 array as an Arrow fixed-size list column."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])


def arrow_to_vectors(column: pa.ChunkedArray | pa.Array, dim: int) -> np.ndarray:
    """Arrow fixed-size list column as an (n, d) float32 array."""
    if isinstance(column, pa.ChunkedArray):
        empty = pa.array([], type=vector_type(dim))
        column = column.combine_chunks() if column.num_chunks else empty
    if len(column) == 0:
        return np.zeros((0, dim), dtype=np.float32)
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(-1, dim)


class Store(Protocol):
    """Tables of record: passages, extractions, concepts, facts, rules, embeddings."""

    def read(self, name: str) -> pa.Table:
        """Whole table (empty table if it does not exist yet)."""

    def upsert(self, name: str, rows: pa.Table, key: str = "id") -> None:
        """Insert or replace rows by ``key``."""

    def delete(self, name: str, key: str, values: list[str]) -> None:
        """Delete rows whose ``key`` is in ``values``."""

    def replace(self, name: str, rows: pa.Table) -> None:
        """Replace the whole table atomically (a new version)."""

    def versions(self) -> dict[str, int]:
        """Current version of every table."""

    def count(self, name: str) -> int:
        """Rows in a table (0 when it does not exist)."""

    def stage_digest(self, stage: str) -> str | None:
        """Digest of the inputs a stage last finished with, or None."""

    def set_stage_digest(self, stage: str, digest: str) -> None:
        """Record the inputs a stage has just finished with."""


@dataclass(frozen=True)
class StoreConfig:
    """Where the LanceDB database lives inside the data home.

    Attributes:
        home: the data home (a folder or an object-store URI).
        subdir: the LanceDB folder inside it.
        read_only: open an existing home without creating it or checking write access (readers
            of a read-only home); a write then fails with a ``StorageError``.
    """

    home: Path | str  # a local folder or an object-store URI (kept a string)
    subdir: str = "lancedb"
    read_only: bool = False


def _unreadable(name: str, exc: BaseException) -> HomeError:
    """A :class:`HomeError`: a table exists but cannot be read (damaged, or not Lance)."""
    detail = " ".join(str(exc).split())[:200]
    return HomeError(f"table {name!r} in the data home is unreadable: {detail}")


def _selected(columns: Sequence[str] | Mapping[str, str]) -> list[str] | dict[str, str]:
    """Columns as LanceDB's ``select`` takes them: names, or output names to SQL expressions."""
    return dict(columns) if isinstance(columns, Mapping) else list(columns)


class LanceStore:
    """LanceDB on disk (or an object-store URI) as the single store of record."""

    def __init__(self, config: StoreConfig) -> None:
        import lancedb

        self.config = config
        uri = str(config.home)
        if not is_uri(uri):
            home = Path(uri)
            if not config.read_only:
                prepare_folder(home)
            uri = str(home / config.subdir)
        else:
            uri = uri.rstrip("/") + "/" + config.subdir
        try:
            self._db = lancedb.connect(uri)
        except OSError as exc:
            raise HomeError(
                f"cannot open the LanceDB folder {uri} of the data home: {exc.strerror or exc}"
            ) from None
        self._tables: dict[str, object] = {}

    @classmethod
    def open(cls, home: str | Path | None = None, read_only: bool = False) -> "LanceStore":
        return cls(StoreConfig(home=home_of(home) if home else default_home(), read_only=read_only))

    @classmethod
    def open_reader(cls, home: str | Path | None = None) -> "LanceStore":
        """The store of an existing home for a reader: read-only when the home is not writable."""
        where = home_of(home) if home else default_home()
        writable = (
            isinstance(where, str) or not where.is_dir() or os.access(where, os.W_OK | os.X_OK)
        )
        return cls.open(home, read_only=not writable)

    @property
    def writable(self) -> bool:
        """False when opened read-only (every write then raises HomeError)."""
        return not self.config.read_only

    @contextmanager
    def _writing(self, name: str):
        """Turn a write the machine refused (disk full, read-only, I/O) into a StorageError."""
        if self.config.read_only:
            raise HomeError(
                f"data home {self.config.home} is not writable: cannot write table {name!r}; "
                "fix its permissions or mount"
            )
        try:
            yield
        except (OSError, RuntimeError) as exc:
            where = f"cannot write table {name!r} of data home {self.config.home}"
            error = storage_error(where, exc)
            if error is None:
                raise
            raise error from None

    @property
    def db(self):
        """The LanceDB connection (for table operations the Store protocol does not cover)."""
        return self._db

    def table(self, name: str):
        """This store's handle of table ``name`` (it sees the store's own writes), or None."""
        if name not in self._tables:
            try:
                self._tables[name] = self._db.open_table(name)
            except (FileNotFoundError, ValueError):
                return None
            except (OSError, RuntimeError) as exc:
                raise _unreadable(name, exc) from None
        return self._tables[name]

    def read(self, name: str) -> pa.Table:
        table = self.table(name)
        if table is None:
            return pa.table({})
        try:
            return table.to_arrow()
        except (OSError, RuntimeError) as exc:
            raise _unreadable(name, exc) from None

    def read_columns(self, name: str, columns: Sequence[str] | Mapping[str, str]) -> pa.Table:
        """Only ``columns`` of every row, in row order (empty table if it does not exist); a
        mapping names each output's SQL expression, computed by Lance (a column's digest)."""
        table = self.table(name)
        if table is None:
            return pa.table({})
        try:
            return table.search().select(_selected(columns)).limit(None).to_arrow()
        except (OSError, RuntimeError) as exc:
            raise _unreadable(name, exc) from None

    def read_without(self, name: str, dropped: Sequence[str]) -> pa.Table:
        """Every column but ``dropped``, every row in row order (empty table if none)."""
        table = self.table(name)
        kept = [] if table is None else [c for c in table.schema.names if c not in dropped]
        return pa.table({}) if table is None else self.read_columns(name, kept)

    def take(self, name: str, offsets: Sequence[int], columns: Sequence[str]) -> pa.Table:
        """``columns`` of the rows at ``offsets`` (row positions; empty table if none)."""
        table = self.table(name)
        if table is None or len(offsets) == 0:
            return pa.table({})
        try:
            return table.take_offsets([int(o) for o in offsets]).select(list(columns)).to_arrow()
        except (OSError, RuntimeError) as exc:
            raise _unreadable(name, exc) from None

    def scan(
        self, name: str, columns: Sequence[str], batch_rows: int = 65536
    ) -> Iterator[pa.RecordBatch]:
        """``columns`` of every row in row order, a batch at a time (memory: one batch)."""
        table = self.table(name)
        if table is None:
            return
        try:
            query = table.search().select(list(columns)).limit(None)
            yield from query.to_batches(batch_rows)
        except (OSError, RuntimeError) as exc:
            raise _unreadable(name, exc) from None

    def read_where(
        self,
        name: str,
        key: str,
        values: list[str],
        columns: Sequence[str] | Mapping[str, str] | None = None,
    ) -> pa.Table:
        """Rows whose ``key`` is one of ``values`` in row order (``columns`` as
        :meth:`read_columns` takes them, or all): up to :data:`WHERE_IN_MAX` values Lance
        filters them (reading ``key``, then the matches); more are filtered here."""
        table = self.table(name)
        if table is None:
            return pa.table({})
        if len(values) > WHERE_IN_MAX:
            full = self.read(name) if columns is None else self.read_columns(name, columns)
            return full.filter(pc.is_in(full[key], value_set=pa.array(values, type=pa.string())))
        query = table.search().where(sql_in(key, values) if values else "false")
        query = query if columns is None else query.select(_selected(columns))
        try:
            return query.limit(None).to_arrow()
        except (OSError, RuntimeError) as exc:
            raise _unreadable(name, exc) from None

    def upsert(self, name: str, rows: pa.Table, key: str = "id") -> None:
        if rows.num_rows == 0:
            return
        with self._writing(name):
            self._upsert(name, rows, key)

    def _upsert(self, name: str, rows: pa.Table, key: str) -> None:
        table = self.table(name)
        if table is None:
            self._tables[name] = self._db.create_table(name, rows)
            return
        (
            table.merge_insert(key)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(rows)
        )

    def delete(self, name: str, key: str, values: list[str]) -> None:
        table = self.table(name)
        if table is None or not values:
            return
        with self._writing(name):
            table.delete(sql_in(key, values))

    def replace(self, name: str, rows: pa.Table | pa.RecordBatchReader) -> None:
        table = self.table(name)
        # overwrite is one new Lance version: readers see the old or the new rows
        with self._writing(name):
            self._tables[name] = self._db.create_table(
                name, rows, mode="create" if table is None else "overwrite"
            )

    def replace_stream(self, name: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch]):
        """:meth:`replace` with rows made while they are written (one version; memory: a batch).
        An error raised making a batch is raised as it is; the table keeps its old rows."""
        failure: list[BaseException] = []

        def guarded() -> Iterator[pa.RecordBatch]:
            try:
                yield from batches
            except BaseException as exc:  # Lance reports it as a RuntimeError: keep the original
                failure.append(exc)
                raise

        try:
            self.replace(name, pa.RecordBatchReader.from_batches(schema, guarded()))
        except Exception:
            if failure:
                raise failure[0] from None
            raise

    def append(self, name: str, rows: pa.Table) -> None:
        """Append rows (safe from several processes: Lance commits appends without conflict)."""
        if rows.num_rows == 0:
            return
        for attempt in range(APPEND_ATTEMPTS):
            table = self.table(name)
            with self._writing(name):
                if table is None:  # create empty first: a racing creator's table is opened
                    table = self._tables[name] = self._db.create_table(
                        name, schema=rows.schema, exist_ok=True
                    )
                try:
                    table.add(rows)
                    return
                except RuntimeError as exc:  # raced a creator's commit: append to what it made
                    if "ncompatible transaction" not in str(exc) or attempt + 1 == APPEND_ATTEMPTS:
                        raise
                    self._tables.pop(name, None)

    def drop(self, name: str) -> None:
        """Delete a table and its files (nothing when it does not exist)."""
        self._tables.pop(name, None)
        with self._writing(name):
            try:
                self._db.drop_table(name)
            except (FileNotFoundError, ValueError):  # already gone
                pass

    def latest(self, name: str) -> tuple[pa.Table, int]:
        """Whole table as committed now by any process, and its version (0 if it does not exist)."""
        table = self.open_latest(name)
        return (table.to_arrow(), int(table.version)) if table is not None else (pa.table({}), 0)

    def open_latest(self, name: str):
        """A fresh handle on a table that sees other processes' commits, or None."""
        try:
            return self._db.open_table(name)
        except (FileNotFoundError, ValueError):
            return None

    def count(self, name: str) -> int:
        """Rows in a table (0 when it does not exist)."""
        table = self.table(name)
        return int(table.count_rows()) if table is not None else 0

    def stage_digest(self, stage: str) -> str | None:
        """Digest of the inputs a stage last finished with, or None."""
        rows = self.read_where(STAGE_STATE, "stage", [stage])
        return rows["digest"][0].as_py() if rows.num_rows else None

    def set_stage_digest(self, stage: str, digest: str) -> None:
        """Record the inputs a stage has just finished with (after its outputs are written)."""
        self.upsert(STAGE_STATE, pa.table({"stage": [stage], "digest": [digest]}), key="stage")

    def table_names(self) -> list[str]:
        """Every table in the database, sorted."""
        names: list[str] = []
        token = None
        while True:
            page = self._db.list_tables(page_token=token, limit=1000)
            names.extend(page.tables)
            token = page.page_token
            if not token:
                return sorted(names)

    def versions(self) -> dict[str, int]:
        out = {}
        for name in (CHUNKS, EXTRACTIONS, PASSAGES, CONCEPTS, FACTS, RULES, SYNONYMS, EMBEDDINGS):
            table = self.table(name)
            if table is not None:
                out[name] = int(table.version)
        return out
