"""Run the ``ingest`` job in this process against a persistent local Dagster instance.

``qortex ingest`` and ``qortex bench ingest`` use this: the same job, assets
and checks as the code location, with the source directory and data home given
on the command line, recorded in the instance under ``DAGSTER_HOME`` (default
``<data home>/dagster``) so the runs show in ``dagster dev`` afterwards.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from dagster import DagsterEventType, DagsterInstance

from pipelines.definitions import build_definitions
from pipelines.jobs import FACTORS_JOB, INGEST_JOB
from pipelines.resources import SourceResource, StoreResource
from qortex_cli.bars import terminal
from qortex_cli.runs.executed import Spread, executed
from qortex_cli.runs.instance_path import check_dagster_home
from qortex_cli.runs.loggers import LOGGERS, quiet
from qortex_core.errors import (
    ConfigError,
    DatasetError,
    HomeError,
    QortexError,
    StorageError,
    storage_error,
)
from qortex_core.ingest.allocators import quiet_startup
from qortex_core.ingest.documents import not_found
from qortex_core.settings import get_settings
from qortex_core.storage import snapshot as snap
from qortex_core.storage.folders import prepare_folder
from qortex_core.storage.store import is_uri
from qortex_core.storage.writer_lock import writer_lock


class IngestFailed(QortexError):
    """The ingest run failed (a step raised, or a blocking check failed); nothing was published."""


REPO_YAML = Path(__file__).resolve().parents[2] / "dagster.yaml"
FALLBACK_YAML = """run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
concurrency:
  runs:
    max_concurrent_runs: 2
    tag_concurrency_limits:
      - key: qortex/writer
        limit: 1
  pools:
    default_limit: 1
telemetry:
  enabled: false
nux:
  enabled: false
"""


@contextmanager
def instance_storage(dagster_home: Path):
    """Failures of the Dagster instance itself (its ``dagster.yaml``, its SQLite storage under
    ``dagster_home``) as one line instead of a traceback.

    Raises:
        StorageError: the machine refused a write (disk full, read-only filesystem, I/O error).
        ConfigError: ``dagster.yaml`` is not valid YAML or not a valid instance config.
        HomeError: the instance's SQLite storage cannot be opened.
    """
    import yaml
    from dagster import DagsterInvalidConfigError
    from dagster._check import CheckError
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (yaml.YAMLError, DagsterInvalidConfigError, CheckError, UnicodeDecodeError) as exc:
        detail = " ".join(str(exc).split())
        detail = detail.removeprefix("Errors whilst loading dagster instance config at ")
        raise ConfigError(
            f"{dagster_home / 'dagster.yaml'} is not a valid Dagster instance config "
            f"({detail[:240]}): fix it, or remove it to get qortex's default"
        ) from None
    except (SQLAlchemyError, OSError) as exc:
        full = _no_space(dagster_home)  # SQLite says "disk I/O error" when the disk is full
        reason = OSError(errno.ENOSPC, "full") if full else exc
        error = storage_error(f"the Dagster instance under {dagster_home} cannot write", reason)
        if error is not None:
            raise error from None
        detail = " ".join(str(getattr(exc, "orig", None) or exc).split())[:200]
        raise HomeError(
            f"the Dagster instance under {dagster_home} cannot open its storage ({detail}): "
            "check that DAGSTER_HOME is a writable folder"
        ) from None


@contextmanager
def _locked(home: Path | str, what: str):
    """The data home's writer lock; a lock file the machine refuses is one line, not a traceback."""
    with ExitStack() as stack:
        try:
            stack.enter_context(writer_lock(home, what))
        except OSError as exc:
            where = f"cannot take the writer lock of data home {home}"
            error = storage_error(where, exc) or HomeError(f"{where}: {exc.strerror or exc}")
            raise error from None
        yield


def _no_space(folder: Path) -> bool:
    """True when the filesystem holding ``folder`` has no block left for an unprivileged write."""
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def local_instance(dagster_home: Path) -> DagsterInstance:
    """The instance under ``dagster_home``, created with qortex's ``dagster.yaml`` if it has none.

    Raises:
        ConfigError: the folder cannot be created, its ``dagster.yaml`` is malformed, or its
            path holds a character Dagster's SQLite storage cannot open (checked first).
        StorageError: the machine refused a write (disk full, read-only filesystem).
    """
    check_dagster_home(dagster_home)
    prepare_folder(dagster_home, "DAGSTER_HOME")
    try:
        target = dagster_home / "dagster.yaml"
        if not target.exists():
            if REPO_YAML.is_file():
                shutil.copyfile(REPO_YAML, target)
            else:
                target.write_text(FALLBACK_YAML)
    except OSError as exc:
        where = f"cannot prepare DAGSTER_HOME {dagster_home}"
        raise storage_error(where, exc) or ConfigError(f"{where}: {exc.strerror or exc}") from None
    os.environ["DAGSTER_HOME"] = str(dagster_home)  # for anything in the yaml that reads it
    with instance_storage(dagster_home):
        return DagsterInstance.from_config(str(dagster_home))


@dataclass(frozen=True)
class IngestOutcome:
    """What a run did: the summary a user sees, every asset's metadata, checks and step seconds."""

    summary: dict
    metadata: dict[str, dict] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    step_seconds: dict[str, float] = field(default_factory=dict)
    run_id: str = ""

    def report(self) -> dict:
        """What ``--json`` prints: the summary with the checks, step seconds and run id."""
        extra = dict(checks=self.checks, step_seconds=self.step_seconds, run_id=self.run_id)
        return dict(self.summary, **extra)


def _metadata(result) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for event in result.get_asset_materialization_events():
        mat = event.materialization
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _step_seconds(instance: DagsterInstance, run_id: str) -> dict[str, float]:
    starts: dict[str, float] = {}
    out: dict[str, float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or not event.step_key:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            starts[event.step_key] = entry.timestamp
        elif event.event_type == DagsterEventType.STEP_SUCCESS and event.step_key in starts:
            out[event.step_key] = entry.timestamp - starts[event.step_key]
    return out


def _budget_failure(result, snapshots: str | Path) -> QortexError | None:
    """The failed blocking check's reason as one line, and which snapshot still answers."""
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.passed or not evaluation.blocking:
            continue
        reason = evaluation.metadata.get("reason")
        text = reason.value if reason is not None else evaluation.check_name
        try:
            kept = f"{snap.latest_name(snapshots)} still answers"
        except QortexError:
            kept = "there is no earlier snapshot"
        return IngestFailed(f"ingest failed: {text}; no snapshot was published, {kept}")
    return None


def first_failure(result, what: str = "ingest") -> QortexError:
    """The first failed step as one line (the library's own message when it raised a QortexError).

    A step the machine stopped (disk full, read-only filesystem) is a :class:`StorageError`.
    """
    for event in result.all_events:
        if event.event_type == DagsterEventType.STEP_FAILURE:
            error = event.step_failure_data.error
            while error is not None and error.cls_name in (
                "DagsterExecutionStepExecutionError",
                "DagsterUserCodeExecutionError",
            ):
                error = error.cause
            text = (error.message if error else "unknown error").strip().splitlines()[-1]
            head, _, rest = text.partition(": ")
            text = (
                rest if error and rest and head.endswith(error.cls_name) else text
            )  # drop "module.Class: "
            where = f"{what} failed at {event.step_key}"
            if error is not None and error.cls_name == "StorageError":
                return StorageError(f"{where}: {text}")
            return storage_error(where, text) or QortexError(f"{where}: {text}")
    return _run_failure(result, what)


def _run_failure(result, what: str) -> QortexError:
    """A run that failed outside any step (its executor could not start, e.g. no dask
    scheduler at the address) as one line: the error's last line."""
    for event in result.all_events:
        if event.event_type == DagsterEventType.RUN_FAILURE:
            error = getattr(event.event_specific_data, "error", None)
            if error is not None and error.message.strip():
                text = error.message.strip().splitlines()[-1]
                head, _, rest = text.partition(": ")
                text = rest if rest and head.endswith(error.cls_name) else text
                return QortexError(f"{what} failed: {text}")
    return QortexError(f"{what} failed")


def summarise(metadata: Mapping[str, dict]) -> dict:
    """The ``--json`` summary from the assets' metadata."""
    docs, chunks, ex = (
        metadata.get("documents", {}),
        metadata.get("chunks", {}),
        metadata.get("extractions", {}),
    )
    emb, snapshot = metadata.get("embeddings", {}), metadata.get("graph_snapshot", {})
    return {
        "documents": docs.get("documents", 0),
        "new_documents": docs.get("new_documents", 0),
        "changed_documents": docs.get("changed_documents", 0),
        "deleted_documents": docs.get("deleted_documents", 0),
        "skipped_files": docs.get("skipped_files", 0),
        "memories": docs.get("memories", 0),
        "merged_memories": docs.get("merged_memories", 0),
        "chunks": chunks.get("chunks", 0),
        "passages": emb.get("passages", chunks.get("chunks", 0)),  # the snapshot's passages
        "extracted": ex.get("extracted", 0),
        "extraction_cache_hits": ex.get("cache_hits", 0),
        "failed": ex.get("failed", 0),
        "llm_calls": ex.get("llm_calls", 0),
        "estimated_cost_usd": ex.get("estimated_cost_usd", 0.0),
        "embedded": emb.get("texts_embedded", 0),
        "embedding_cache_hits": emb.get("cache_hits", 0),
        "concepts": emb.get("concepts", 0),
        "facts": emb.get("facts", 0),
        "synonym_edges": metadata.get("synonym_edges", {}).get("synonym_edges", 0),
        "snapshot": snapshot.get("snapshot", ""),
        "snapshot_version": snapshot.get("snapshot_version", 0),
        "snapshot_status": snapshot.get("status", ""),
        "extractor": ex.get("extractor", ""),
        "model": ex.get("model", ""),
        "embedder": emb.get("embedding_model", ""),
    }


def _instance_home(home: Path | str, given: Path | None, configured: str | None) -> Path:
    """The Dagster instance folder: ``given``, else ``$DAGSTER_HOME``, else ``home/dagster``.

    Raises:
        ConfigError: ``home`` is a URI and no instance folder is set.
    """
    if is_uri(home) and not (given or configured):
        raise ConfigError(
            f"data home {home} is a URI: set DAGSTER_HOME to a local folder for the Dagster "
            "instance"
        )
    return Path(given or configured or Path(home) / "dagster")


def run_ingest(
    source: Path | None,
    home: Path | str,
    dagster_home: Path | None = None,
    resources: Mapping[str, object] | None = None,
    progress: bool = True,
    env: Mapping[str, str] | None = None,
) -> IngestOutcome:
    """Run the ``ingest`` job over ``source`` into ``home``, in this process.

    Args:
        source: the source directory (or one file); None: no folder (consolidate written
            memories and keep the file documents already stored).
        home: the data home, a folder or an object-store URI (then ``$QORTEX_SNAPSHOT_HOME``
            names a local snapshot folder and ``$DAGSTER_HOME`` the instance folder).
        dagster_home: the instance folder; default ``$DAGSTER_HOME`` or ``home/dagster``.
        resources: replacements for the configured resources (the embedder, say).
        progress: print step progress on stderr; env: configuration (default ``os.environ``).

    Raises:
        DatasetError: ``source`` is neither a directory nor a file.
        QortexError: a step failed; the message names it.
    """
    if source is not None and not (Path(source).is_dir() or Path(source).is_file()):
        raise DatasetError(not_found(source))
    with quiet_startup():  # the instance and the definitions: long-lived objects only
        settings = get_settings(env)
        env = os.environ if env is None else env
        remote = is_uri(home)
        dagster_home = _instance_home(home, dagster_home, settings.dagster_home)
        check_dagster_home(Path(dagster_home))  # before anything is written, the home included
        if not remote:  # a home that cannot be written fails here, in one line, before any step
            prepare_folder(Path(home))
        instance = local_instance(Path(dagster_home))
        store = StoreResource(
            home=str(home), snapshot_home=settings.snapshot_home if remote else ""
        )
        folder = SourceResource(path=str(source) if source is not None else "")
        chosen = {"store": store, "source": folder, **(resources or {})}
        chosen_logger = "progress" if progress else "quiet"
        defs = build_definitions(env, resources=chosen, loggers=LOGGERS)
    bars = {"config": {"bars": terminal(sys.stderr)}} if progress else {}
    run_config = {"loggers": {chosen_logger: bars}}
    what = "qortex ingest" if source is not None else "qortex consolidate"
    spread = Spread.of(settings, store.home, store.snapshot_home, source, bool(resources))
    with _locked(home, what), instance_storage(Path(dagster_home)):
        with executed(defs.resolve_job_def(INGEST_JOB), instance, run_config, spread) as result:
            failed = _budget_failure(result, store.snapshots())  # a failed blocking check
            if failed is not None or not result.success:  # fails the run, even if Dagster did not
                raise failed or first_failure(result)
            metadata = _metadata(result)
            checks = {e.check_name: bool(e.passed) for e in result.get_asset_check_evaluations()}
            run_id = result.run_id
    return IngestOutcome(
        summarise(metadata), metadata, checks, _step_seconds(instance, run_id), run_id
    )


def materialize_factors(
    home: str | Path, dagster_home: str | Path | None = None, force: bool = False
) -> dict:
    """Run the ``factors`` job in this process against the local instance (no daemon).

    The instance is ``dagster_home``, else ``$DAGSTER_HOME``, else ``<home>/dagster`` (as
    ``qortex ingest``).

    Returns:
        the asset's metadata: ``via``, ``run_id``, ``folded``, ``concepts``, ``watermark``,
        ``skipped``, ``boosted``, ``suppressed``.
    """
    home_text = str(home)
    fallback = (
        Path(home_text) / "dagster"
        if not is_uri(home_text)
        else Path.home() / ".qortex" / "dagster"
    )
    dagster_home = dagster_home or get_settings().dagster_home or fallback
    defs = build_definitions(
        os.environ, resources={"store": StoreResource(home=home_text)}, loggers={"quiet": quiet}
    )
    instance = local_instance(Path(dagster_home))
    with instance_storage(Path(dagster_home)):
        result = defs.resolve_job_def(FACTORS_JOB).execute_in_process(
            instance=instance,
            raise_on_error=False,
            run_config={
                "loggers": {"quiet": {}},
                "ops": {"teleportation_factors": {"config": {"force": force}}},
            },
        )
    if not result.success:
        raise first_failure(result, "factors update")
    event = result.get_asset_materialization_events()[0].materialization
    meta = {k: v.value for k, v in event.metadata.items()}
    return {
        "via": "dagster",
        "run_id": result.run_id,
        "folded": meta["folded_events"],
        "concepts": meta["concepts"],
        "watermark": meta["events_watermark"],
        "skipped": meta["skipped"],
        "boosted": meta["boosted"],
        "suppressed": meta["suppressed"],
    }
