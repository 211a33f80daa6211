"""Immutable, versioned graph snapshots published by an atomic pointer switch.

Layout under ``<home>/snapshots``::

    v000003-1a2b3c4d/   manifest.json, *.npy and *.arrow (both memory-mapped on load)
    LATEST              name of the current snapshot directory (replaced atomically)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import threading
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from qortex_core.errors import HomeError, QortexError, SnapshotError
from qortex_core.storage import snapshot_stamp as stamp
from qortex_core.storage.checksums import digests_of
from qortex_core.storage.pointer import read_own_file, read_pointer
from qortex_core.storage.segmented_rows import join_segments
from qortex_core.storage.segmented_table import TableParts, join_tables, table_segments_of
from qortex_core.storage.snapshot_files import write_payload
from qortex_core.storage.snapshot_schema import check_manifest, linked_segments, segments_of
from qortex_core.storage.snapshot_shapes import shape_problems

FORMAT = 2  # 2: tables as Arrow IPC files (1: Parquet)
POINTER = "LATEST"
_NAME = re.compile(r"v([0-9]{6})-[0-9a-f]{8}")  # used with fullmatch: no trailing newline
# np.load parses a .npy header with ast.literal_eval, and on CPython 3.11 before 3.11.8 two
# threads building ASTs at once can fail with "SystemError: AST constructor recursion depth
# mismatch" (python/cpython#106905): retrievers opened in threads read their headers one at a time
_NPY_HEADERS = threading.Lock()
_FILE = re.compile(r"^[A-Za-z0-9_\-]+\.(npy|arrow)$")


@dataclass(frozen=True)
class Snapshot:
    """The files of one snapshot: arrays and Arrow tables by file stem, and the manifest.

    What they must be is defined once in :mod:`qortex_core.storage.snapshot_schema`
    (:class:`~qortex_core.storage.snapshot_schema.SnapshotArrays`, ``SnapshotTables``,
    ``SnapshotCounts``); :func:`load` refuses a manifest that lacks any of them.
    """

    arrays: dict[str, np.ndarray]
    tables: dict[str, pa.Table]
    manifest: dict = field(default_factory=dict)
    path: Path | None = None
    table_parts: dict[str, TableParts] = field(default_factory=dict)  # segmented_table.py

    @property
    def adjacency(self) -> sp.csr_matrix:
        n = len(self.arrays["adj_indptr"]) - 1
        return sp.csr_matrix(
            (self.arrays["adj_data"], self.arrays["adj_indices"], self.arrays["adj_indptr"]),
            shape=(n, n),
        )

    @property
    def n_phrases(self) -> int:
        return int(self.manifest["counts"]["phrases"])

    @property
    def version(self) -> int:
        return int(self.manifest.get("version", 0))


SNAPSHOT_HOME_ENV = "QORTEX_SNAPSHOT_HOME"
_TENANT_SUFFIX = re.compile(r"/tenants/([a-z0-9][a-z0-9_-]{0,63})/*$")


def snapshot_home(home: str | Path, local: str | Path | None = None) -> Path:
    """The local folder that holds ``snapshots/`` for a data home.

    A local home holds its own. A URI home (``s3://``, ``gs://``, ``az://``: LanceDB tables in an
    object store) cannot, since publishing relies on an atomic rename: its snapshots live under
    ``local`` (default ``$QORTEX_SNAPSHOT_HOME``), a tenant's (``.../tenants/T``) under
    ``local/tenants/T``.

    Raises:
        HomeError: a URI home and no snapshot folder given.
    """
    if "://" not in str(home):
        return Path(home).expanduser()
    if not local:
        from qortex_core.settings import get_settings

        local = get_settings().snapshot_home
    if not local:
        raise HomeError(
            f"data home {home} is a URI: set {SNAPSHOT_HOME_ENV} to a local or mounted folder "
            "for its snapshots"
        )
    tenant = _TENANT_SUFFIX.search(str(home))
    base = Path(local).expanduser()
    return base / "tenants" / tenant.group(1) if tenant else base


def snapshots_dir(home: str | Path) -> Path:
    return snapshot_home(home) / "snapshots"


def _read_arrow(path: Path) -> pa.Table:
    """An Arrow IPC file as a table whose buffers live in a read-only memory map (paged in on
    use)."""
    with pa.ipc.open_file(pa.memory_map(str(path), "r")) as reader:
        return reader.read_all()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_versions(home: str | Path) -> list[str]:
    """Published snapshot directory names, oldest first."""
    root = snapshots_dir(home)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _NAME.fullmatch(p.name))


def _new_folder(home: str | Path, prefix: str) -> Path:
    """A new empty folder ``snapshots/{prefix}<random>``.

    Raises:
        HomeError: the snapshots folder cannot be written.
    """
    root = snapshots_dir(home)
    try:
        root.mkdir(parents=True, exist_ok=True)
        folder = root / f"{prefix}{uuid.uuid4().hex}"
        folder.mkdir()
    except OSError as exc:
        raise HomeError(
            f"cannot write snapshots under data home {home}: {exc.strerror or exc}"
        ) from None
    return folder


def staging_dir(home: str | Path) -> Path:
    """A new empty folder under ``snapshots/`` for files a build writes before publishing
    (named ``.tmp-*`` so `qortex doctor` reports one an interrupted build left behind)."""
    return _new_folder(home, ".tmp-stage-")


def publish(
    home: str | Path,
    snapshot: Snapshot,
    files: Mapping[str, Path] | None = None,
    check: Callable[[str], None] | None = None,
    digests: Mapping[str, str] | None = None,
    blocked: Collection[str] = (),
) -> Path:
    """Write ``snapshot`` to a new version directory and switch ``LATEST`` to it.

    ``check(name)`` runs on the complete directory before the pointer moves: when it raises,
    the directory is removed and ``LATEST`` stays (a snapshot failing its probe is not published).
    ``files`` maps file stems to finished ``.npy`` or ``.arrow`` files (from :func:`staging_dir`
    or an older snapshot, left unchanged until this returns), linked (or copied) in, not
    written from memory; ``digests``:
    the checksums of some of them (by name), so they are not read again; tables named in
    ``blocked`` are written by blocks of rows (:func:`.snapshot_files.write_arrow`). All is
    fsynced before the pointer moves (``os.replace``): readers see old or new, never partial."""
    root = snapshots_dir(home)
    tmp = _new_folder(home, ".tmp-")
    try:
        digests = write_payload(tmp, snapshot, files or {}, digests or {}, blocked)
        existing = list_versions(home)
        version = int(existing[-1][1:7]) + 1 if existing else 1
        manifest = dict(
            linked_segments(snapshot.manifest, files or {}),
            format=FORMAT,
            version=version,
            files=digests,
            created=dt.datetime.now(dt.timezone.utc).isoformat(),
        )
        body = json.dumps(manifest, indent=2, sort_keys=True)
        name = f"v{version:06d}-{hashlib.sha256(body.encode()).hexdigest()[:8]}"
        manifest["name"] = name
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        stamp.seal(tmp, digests)  # hashed as written: a load need not hash them again
        for child in tmp.iterdir():
            with open(child, "rb") as fh:
                os.fsync(fh.fileno())
        # the directory's entries too, so a crash cannot leave LATEST on a folder missing files
        _fsync_dir(tmp)
        final = root / name
        os.rename(tmp, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if check is not None:
        try:
            check(name)
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
    pointer_tmp = root / f".{POINTER}.{uuid.uuid4().hex}"
    pointer_tmp.write_text(name + "\n")
    with open(pointer_tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(pointer_tmp, root / POINTER)
    _fsync_dir(root)
    return final


def latest_name(home: str | Path) -> str:
    """Name of the snapshot ``LATEST`` points to.

    Raises:
        SnapshotError: nothing has been published under ``home``, or ``LATEST`` is not a valid
            pointer (its content is never echoed).
        HomeError: ``home`` is a file.
    """
    pointer = snapshots_dir(home) / POINTER
    try:
        return read_pointer(pointer, _NAME)
    except FileNotFoundError:
        raise SnapshotError(
            f"no snapshot published under data home {home} (run `qortex ingest` first, or "
            "choose another home with --home or QORTEX_HOME)"
        ) from None
    except NotADirectoryError:
        raise HomeError(
            f"data home {home} is not a directory (or lies under a file): choose another with "
            "--home or QORTEX_HOME"
        ) from None
    except OSError as exc:
        raise SnapshotError(f"cannot read {pointer}: {exc.strerror}") from None


def latest_inputs(home: str | Path) -> str | None:
    """The latest snapshot's ``inputs_digest`` as its manifest states it (nothing verified:
    a hint that the caller confirms on the loaded snapshot), None when there is none."""
    try:
        name = latest_name(home)
        manifest = json.loads(read_own_file(snapshots_dir(home) / name / "manifest.json"))
    except (OSError, ValueError, QortexError):
        return None
    digest = manifest.get("inputs_digest") if isinstance(manifest, dict) else None
    return digest if isinstance(digest, str) else None


def load(
    home: str | Path, name: str | None = None, verify: bool = True, rehash: bool = False
) -> Snapshot:
    """Load a snapshot (the latest by default), arrays memory-mapped.

    Args:
        home: the data home.
        name: a snapshot directory name, or a version number as a string; None for the latest.
        verify: check every file's checksum against the manifest (a file the folder's stamp
            holds unchanged since it was hashed is not read again, :mod:`.snapshot_stamp`).
        rehash: hash every file, whatever the stamp says.

    Raises:
        SnapshotError: missing snapshot, bad manifest, bad checksum or truncated array.
    """
    name = resolve_name(home, name)
    path = snapshots_dir(home) / name
    try:
        manifest = json.loads(read_own_file(path / "manifest.json"))  # never a symlink's target
    except FileNotFoundError:
        raise SnapshotError(
            f"snapshot {name} not found under {home} (`qortex snapshots` lists them)"
        ) from None
    except (OSError, json.JSONDecodeError, SnapshotError) as exc:
        raise SnapshotError(f"snapshot {name} has an unreadable manifest: {exc}") from None
    files = _manifest_files(manifest, name)
    check_manifest(manifest, name)  # valid JSON that lies (an array or a count missing) is refused
    arrays: dict[str, np.ndarray] = {}
    tables: dict[str, pa.Table] = {}
    known = stamp.trusted(path, files) if verify and not rehash else set()
    hashed = [f for f in files if f not in known] if verify else []
    keys = stamp.keys_of(path, hashed)  # before hashing: a write meanwhile shows next time
    # each file hashed by its checksum's algorithm (an older snapshot's are SHA-256)
    digests = dict(zip(hashed, digests_of([path / f for f in hashed], [files[f] for f in hashed])))
    for fname, checksum in files.items():
        fpath = path / fname
        if not fpath.is_file():
            raise SnapshotError(f"snapshot {name} is missing {fname}")
        digest = checksum if fname in known else digests.get(fname)
        if verify and digest != checksum:
            raise SnapshotError(f"snapshot {name}: checksum mismatch in {fname}")
        try:
            if fname.endswith(".npy"):
                with _NPY_HEADERS:
                    arrays[fname[:-4]] = np.load(fpath, mmap_mode="r")
            else:
                tables[fname[: -len(".arrow")]] = _read_arrow(fpath)
        except (ValueError, OSError, pa.ArrowInvalid) as exc:
            raise SnapshotError(f"snapshot {name}: cannot read {fname}: {exc}") from None
    try:  # arrays and tables kept as a base file and a delta (segmented_rows.py, _table.py)
        join_segments(segments_of(manifest), arrays, path)
        parts = join_tables(table_segments_of(manifest), tables, arrays, path)
    except ValueError as exc:
        raise SnapshotError(f"snapshot {name}: {exc}") from None
    lies = shape_problems(arrays, tables, manifest["counts"])  # counts that disagree with rows
    if lies:
        raise SnapshotError(f"snapshot {name} does not match its manifest: {'; '.join(lies)}")
    if hashed:  # found whole: the next load need not hash them
        stamp.record(path, files, {**stamp.keys_of(path, sorted(known)), **keys})
    return Snapshot(arrays=arrays, tables=tables, manifest=manifest, path=path, table_parts=parts)


def _manifest_files(manifest: object, name: str) -> dict[str, str]:
    """The manifest's ``files`` map, checked: plain ``*.npy``/``*.arrow`` names with their
    checksums (:mod:`.checksums`).

    Raises:
        SnapshotError: the manifest is not an object or its file list is malformed.
    """
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if isinstance(manifest, dict) and manifest.get("format", FORMAT) != FORMAT:
        raise SnapshotError(
            f"snapshot {name} has format {manifest.get('format')!r}; this qortex reads format "
            f"{FORMAT}: "
            "publish a new snapshot"
        )
    if not isinstance(files, dict) or not files:
        raise SnapshotError(f"snapshot {name} has a malformed manifest: no 'files' map")
    for fname, checksum in files.items():
        if not _FILE.fullmatch(fname) or not isinstance(checksum, str):
            raise SnapshotError(
                f"snapshot {name} has a malformed manifest: bad file entry {fname[:60]!r}"
            )
    return files


def resolve_name(home: str | Path, name: str | int | None) -> str:
    """Snapshot directory name for ``None`` (latest), a version number or a full name."""
    if name is None:
        return latest_name(home)
    text = str(name)
    if re.fullmatch(r"[0-9]{1,9}", text):  # ASCII digits only: "²".isdigit() but int("²") fails
        for candidate in list_versions(home):
            if int(candidate[1:7]) == int(text):
                return candidate
        raise SnapshotError(
            f"no snapshot version {text} under {home} (`qortex snapshots` lists them)"
        )
    if not _NAME.fullmatch(text):
        raise SnapshotError(
            f"not a snapshot name: {text!r}: give a version number or a name from `qortex "
            "snapshots`"
        )
    return text


def load_latest_good(home: str | Path, verify: bool = True) -> tuple[Snapshot, list[str]]:
    """The snapshot ``LATEST`` points to or, when it is unusable, the newest good one before it.

    Args:
        home: the data home.
        verify: check every file's checksum against the manifest.

    Returns:
        The loaded snapshot and one line per snapshot refused on the way (empty when the latest
        loaded).

    Raises:
        SnapshotError: nothing published, or no snapshot under ``home`` loads (the message names
        each problem).
        HomeError: ``home`` is a file.
    """
    problems: list[str] = []
    versions = list_versions(home)
    try:
        first: str | None = latest_name(home)
    except SnapshotError as exc:
        if not versions:
            raise
        problems.append(str(exc))
        first = None
    older = [v for v in reversed(versions) if first is None or v < first]
    for name in ([first] if first else []) + older:
        try:
            return load(home, name, verify=verify), problems
        except SnapshotError as exc:
            problems.append(str(exc))
    raise SnapshotError(
        f"no usable snapshot under {home}: " + "; ".join(problems) + "; run `qortex ingest` to "
        "publish a good one"
    )
