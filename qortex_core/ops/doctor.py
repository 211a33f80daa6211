"""Health checks of a data home: tables, snapshot checksums, the ``LATEST`` pointer, orphaned files,
a probe query.

Each check returns :class:`Check` rows; :func:`diagnose` runs them all and never
raises for a damaged home: damage is what it reports. Only a home that does not
exist is a user error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from qortex_core.embed import Embedder
from qortex_core.errors import HomeError, QortexError, SnapshotError
from qortex_core.jsonable import JsonRecord
from qortex_core.ops.table_checks import (  # noqa: F401  (the table checks, named here as before)
    dangling_edges,
    extraction_status,
    failed_extraction_errors,
)
from qortex_core.storage import snapshot as snap
from qortex_core.storage.store import LanceStore


@dataclass(frozen=True)
class DoctorConfig:
    """What counts as a problem.

    Attributes:
        orphan_min_age_s: temporary files younger than this may belong to a publish in progress and
        are not reported.
        probe: run a query against the latest snapshot.
        probe_top_k: hits the probe asks for.
        probe_embeds: embed the probe text (finds vectors out of step with their passages);
            False: query with the passage's stored vector, so no model is loaded or called
            (the Dagster asset check after every run).
    """

    orphan_min_age_s: float = 300.0
    probe: bool = True
    probe_top_k: int = 3
    probe_embeds: bool = True


@dataclass(frozen=True)
class Check(JsonRecord):
    """One finding: what was checked, whether it is fine, and a plain sentence."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class DoctorReport(JsonRecord):
    """Every finding for one home, and the row count of each table that opened."""

    home: str
    checks: tuple[Check, ...]
    tables: dict[str, int]

    json_extras = ("healthy",)  # to_dict() adds it

    @property
    def healthy(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def problems(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if not c.ok)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def check_tables(home: Path) -> tuple[list[Check], dict[str, int]]:
    """Open every LanceDB table under ``home`` and count its rows."""
    if not (home / "lancedb").is_dir():
        from qortex_core.storage.tenants import list_tenants

        others = list_tenants(home)[1:]
        hint = f" (tenants here: {', '.join(others)}; check one with --tenant)" if others else ""
        return [
            Check(
                "tables",
                False,
                f"no LanceDB folder {home / 'lancedb'}: nothing was ingested here{hint}",
            )
        ], {}
    try:
        store = LanceStore.open_reader(home)  # a read-only home is diagnosed, not refused
        names = store.table_names()
    except (QortexError, OSError, RuntimeError, ValueError) as exc:
        return [Check("tables", False, f"cannot list the LanceDB tables: {_one_line(exc)}")], {}
    checks: list[Check] = []
    counts: dict[str, int] = {}
    for name in names:
        try:
            table = store.open_latest(name)
            counts[name] = int(table.count_rows())
            read = table.to_arrow().num_rows  # every data file, not just the manifest
            if read != counts[name]:
                raise ValueError(f"the manifest counts {counts[name]} rows but {read} were read")
            checks.append(Check(f"table {name}", True, f"{counts[name]} rows"))
        except (OSError, RuntimeError, ValueError, AttributeError) as exc:
            checks.append(
                Check(f"table {name}", False, f"table {name} does not open: {_one_line(exc)}")
            )
    if not names:
        checks.append(Check("tables", False, "the LanceDB folder holds no tables"))
    return checks, counts


def check_snapshots(home: Path) -> list[Check]:
    """Verify every published snapshot's files against its manifest checksums."""
    checks = []
    for name in snap.list_versions(home):
        try:
            loaded = snap.load(home, name, verify=True, rehash=True)
            files = len(loaded.manifest["files"])
            checks.append(Check(f"snapshot {name}", True, f"{files} files match their checksums"))
        except QortexError as exc:
            checks.append(Check(f"snapshot {name}", False, _one_line(exc)))
    return checks


def check_pointer(home: Path) -> Check:
    """``LATEST`` names a published snapshot directory."""
    versions = snap.list_versions(home)
    try:
        name = snap.latest_name(home)
    except QortexError as exc:
        return Check(
            "pointer",
            False,
            _one_line(exc)
            if versions or "no snapshot" not in str(exc)
            else "no snapshot published yet (run `qortex ingest`)",
        )
    if name not in versions:
        return Check(
            "pointer", False, f"LATEST points to {name}, which is not in {snap.snapshots_dir(home)}"
        )
    newer = [v for v in versions if v > name]
    detail = f"LATEST -> {name}" + (
        f" ({len(newer)} newer unpublished folder(s): {', '.join(newer)})" if newer else ""
    )
    return Check("pointer", True, detail)


def check_orphans(home: Path, config: DoctorConfig = DoctorConfig()) -> list[Check]:
    """Leftovers of interrupted publishes under ``snapshots/``: ``.tmp-*`` folders, pointer temp
    files, strays."""
    root = snap.snapshots_dir(home)
    if not root.is_dir():
        return []
    now = time.time()
    published = set(snap.list_versions(home))
    checks = []
    for entry in sorted(root.iterdir()):
        name = entry.name
        if name == snap.POINTER or name in published:
            continue
        try:
            age = now - entry.lstat().st_mtime
        except OSError:
            continue
        if age < config.orphan_min_age_s:
            continue
        if name.startswith(".tmp-"):
            what = "unfinished snapshot folder from an interrupted publish"
        elif name.startswith(f".{snap.POINTER}."):
            what = "stale pointer temp file from an interrupted publish"
        else:
            what = "unexpected entry"
        checks.append(
            Check(f"orphan {name}", False, f"{what}: {entry} ({int(age)} s old; safe to delete)")
        )
    return checks


def _probe_answers(retriever: Any, probe: str, config: DoctorConfig) -> tuple[Any, Any]:
    """The probe's answer in the default mode and in dense mode (top 1)."""
    if config.probe_embeds:
        return (
            retriever.query(probe, top_k=config.probe_top_k),
            retriever.query(probe, top_k=1, mode="dense"),
        )
    vector = np.asarray(retriever.view.passage_vectors[0], dtype=np.float32)  # (d,) stored
    return (
        retriever.search(probe, vector, config.probe_top_k, "auto"),
        retriever.search(probe, vector, 1, "dense"),
    )


def check_probe(
    home: Path,
    embedder: Embedder,
    config: DoctorConfig = DoctorConfig(),
    name: str | None = None,
) -> Check:
    """The latest snapshot (or snapshot ``name``; no fallback) answers a query made from its
    first passage, and finds that passage. A snapshot with no passage (every memory forgotten)
    has nothing to probe and passes when its embedder matches."""
    from qortex_core.query.embedder_check import embedder_problem
    from qortex_core.query.retriever import Retriever

    try:
        loaded = snap.load(home, name, verify=False)  # checksums are check_snapshots' job
        problem = embedder_problem(loaded, embedder.name, lambda: embedder.dim)
        if problem is not None:  # its vectors would be compared with another model's
            return Check("probe", False, problem)
        retriever = Retriever(loaded, embedder)
        if not retriever.passages:
            return Check(
                "probe", True, f"snapshot {loaded.manifest['name']} is empty: nothing to probe"
            )
        first = retriever.passages[0]
        probe = " ".join(f"{first['title']} {first['text']}".split())[:2000]
        result, dense = _probe_answers(retriever, probe, config)
    except QortexError as exc:
        return Check("probe", False, f"the latest snapshot does not load: {_one_line(exc)}")
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        return Check(
            "probe",
            False,
            f"the latest snapshot is malformed: {type(exc).__name__}: {_one_line(exc)}",
        )
    return _judge_probe(loaded.manifest["name"], first, result, dense)


def probe_gate(
    home: Path | str,
    embedder: Embedder,
    on_pass: Callable[[str, str], None] | None = None,
) -> Callable[[str], None]:
    """A ``verify`` for :func:`qortex_core.ingest.stages.build_snapshot`: the new snapshot must
    pass the probe (stored vectors, no model call) before ``LATEST`` moves to it;
    ``on_pass(name, detail)`` is told of a pass (:mod:`.probe_memo` remembers it).

    Raises (the returned function):
        SnapshotError: the probe failed; the snapshot is not published.
    """

    def verify(name: str) -> None:
        found = check_probe(Path(home), embedder, DoctorConfig(probe_embeds=False), name=name)
        if not found.ok:
            raise SnapshotError(
                f"snapshot {name} failed its probe and was not published: {found.detail}"
            )
        if on_pass is not None:
            on_pass(name, found.detail)

    return verify


def _judge_probe(name: str, first: dict, result: Any, dense: Any) -> Check:
    """The probe's verdict from its answers: a hit, and the passage itself first in dense mode."""
    if not result.passages:
        return Check("probe", False, f"snapshot {name} returned no passage for a probe query")
    if (
        not dense.passages or dense.passages[0].text != first["text"]
    ):  # vectors out of step with the passages
        return Check(
            "probe",
            False,
            f"snapshot {name}: a query made of passage {first['id']}'s own text "
            f"does not rank it first in dense mode: its vectors do not match its passages",
        )
    return Check(
        "probe",
        True,
        f"snapshot {name} answered a probe query ({len(result.passages)} hits, "
        f"top: {result.passages[0].title[:60]!r})",
    )


def check_embedding(home: Path, embedder: Embedder) -> Check | None:
    """The latest snapshot's model and vector width match ``embedder`` (its name, and its width
    when the model declares it without loading: :mod:`qortex_core.embed_width`). None when no
    snapshot loads (the pointer and snapshot checks report that)."""
    from qortex_core.embed_width import declared_dim
    from qortex_core.query.embedder_check import embedder_problem

    try:
        loaded = snap.load(home, verify=False)
    except QortexError:
        return None
    problem = embedder_problem(loaded, embedder.name, lambda: declared_dim(embedder))
    if problem is not None:
        return Check("embedder", False, f"{problem}: queries are refused until it is re-ingested")
    return Check("embedder", True, f"snapshot {loaded.manifest['name']} matches {embedder.name}")


def diagnose(
    home: str | Path, embedder: Embedder | None = None, config: DoctorConfig = DoctorConfig()
) -> DoctorReport:
    """Run every check on ``home``.

    Args:
        home: the data home.
        embedder: for the probe query; None loads the configured one (only when the probe runs).
        config: thresholds and whether to probe.

    Raises:
        HomeError: ``home`` does not exist or is not a directory.
    """
    home = Path(home).expanduser()
    if not home.is_dir():
        raise HomeError(f"data home {home} does not exist or is not a directory")
    table_checks, counts = check_tables(home)
    checks = (
        table_checks + check_snapshots(home) + [check_pointer(home)] + check_orphans(home, config)
    )
    if snap.list_versions(home):
        from qortex_core.embed import make_embedder

        try:
            embedder = embedder or make_embedder()  # loads no model until the probe embeds
        except QortexError as exc:
            return DoctorReport(
                str(home), (*checks, Check("embedder", False, _one_line(exc))), counts
            )
        matched = check_embedding(home, embedder)
        checks += [matched] if matched is not None else []
        if config.probe:
            checks.append(check_probe(home, embedder, config))
    return DoctorReport(str(home), tuple(checks), counts)
