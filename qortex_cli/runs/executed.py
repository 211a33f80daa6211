"""Where ``qortex ingest`` runs the ``ingest`` job: in its own process (the default), or on the
executor ``QORTEX_EXECUTOR`` names (multiprocess, dask), whose step processes rebuild the job
(:func:`ingest_job`) from their environment, with the data home and source
folder of the command line as the store's and source's values (a dask worker started elsewhere
has its own ``QORTEX_HOME``; the embedder, extractor and keys do come from the worker's
environment).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from dagster import DagsterInstance, build_reconstructable_job, execute_job

from pipelines.definitions import build_definitions
from pipelines.jobs import INGEST_JOB
from pipelines.resources import SourceResource, StoreResource
from qortex_cli.runs.loggers import LOGGERS
from qortex_core.ingest.allocators import batch_collection, reused_pages
from qortex_core.settings import Settings
from qortex_core.storage.store import is_uri


@dataclass(frozen=True)
class Spread:
    """A run on another executor: what its step processes need to rebuild the job.

    Attributes:
        env: variables set for the run (the home, snapshot home and source folder; "" unsets),
            also passed to ``ingest_job``, which makes them the store's and source's values.
        shaping: the settings that shape the job's definition, passed to ``ingest_job`` (and
            keying Dagster's per-process cache of the rebuilt job).
    """

    env: tuple[tuple[str, str], ...]
    shaping: tuple[tuple[str, str], ...]

    @classmethod
    def of(
        cls,
        settings: Settings,
        home: str,
        snapshot_home: str,
        source: Path | None,
        replaced_resources: bool,
    ) -> Spread | None:
        """None (run in this process) unless ``QORTEX_EXECUTOR`` starts other processes and a
        source folder is given: ``qortex consolidate`` and replaced resources stay here."""
        if settings.executor == "in_process" or source is None or replaced_resources:
            return None
        local = not is_uri(home)  # step processes may start elsewhere: absolute paths
        env = {
            "QORTEX_HOME": str(Path(home).expanduser().resolve()) if local else home,
            "QORTEX_SNAPSHOT_HOME": snapshot_home,
            "QORTEX_SOURCE_DIR": str(Path(source).resolve()),
        }
        shaping = {
            "QORTEX_SHARDS": str(settings.shards),
            "QORTEX_EXECUTOR": settings.executor,
            "QORTEX_MAX_CONCURRENT": str(settings.max_concurrent),
            "QORTEX_DASK_ADDRESS": settings.dask_address,
        }
        return cls(tuple(env.items()), tuple(shaping.items()))


@contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set (an empty value unsets) while the block runs."""
    saved = dict(os.environ)  # restored below; not a configuration read (settings.py does those)
    before = {name: saved.get(name) for name in values}
    try:
        for name, value in values.items():
            if value:
                os.environ[name] = value
            else:
                os.environ.pop(name, None)
        yield
    finally:
        for name, old in before.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@contextmanager
def executed(
    job: Any, instance: DagsterInstance, run_config: dict, spread: Spread | None
) -> Iterator[Any]:
    """The run's result, valid inside the block: ``job`` executed in this process with
    ``run_config``, or (``spread``) the job rebuilt on its executor with the same ``run_config``
    (the rebuilt job has the same ``progress`` and ``quiet`` loggers, so ``--quiet`` prints
    nothing and a failure no Dagster log lines)."""
    if spread is None:
        with batch_collection(), reused_pages():  # this process runs the stages
            result = job.execute_in_process(
                instance=instance, raise_on_error=False, run_config=run_config
            )
        yield result
        return
    recon = build_reconstructable_job(  # home and source as values: workers may run elsewhere
        "qortex_cli.runs.executed",
        "ingest_job",
        reconstructable_kwargs=dict(spread.env + spread.shaping),
    )
    with _environment(dict(spread.env)):
        with execute_job(recon, instance, raise_on_error=False, run_config=run_config) as result:
            yield result


def ingest_job(**overrides: str) -> Any:
    """The ``ingest`` job built from the process environment, with ``overrides`` (variable ->
    value) on top: the reconstructable target (``dagster.reconstructable(ingest_job)`` or
    ``build_reconstructable_job(..., reconstructable_kwargs=overrides)``) from which executors
    that start other processes (multiprocess, dask workers) rebuild the job. It has the
    ``progress`` and ``quiet`` loggers of ``qortex ingest`` (the run config picks one; none
    picked: Dagster's console logger)."""
    env = {**os.environ, **overrides}
    named = _named_resources(overrides)
    return build_definitions(env, resources=named, loggers=LOGGERS).resolve_job_def(INGEST_JOB)


def _named_resources(overrides: Mapping[str, str]) -> dict[str, object]:
    """The store and source as values when ``overrides`` name the home and source folder (the
    command line's): a step process on a dask worker started elsewhere then uses them, not the
    worker's own ``QORTEX_HOME`` and ``QORTEX_SOURCE_DIR`` (resources from the environment are
    resolved in the step process)."""
    out: dict[str, object] = {}
    if overrides.get("QORTEX_HOME"):
        snapshot_home = overrides.get("QORTEX_SNAPSHOT_HOME", "")
        out["store"] = StoreResource(home=overrides["QORTEX_HOME"], snapshot_home=snapshot_home)
    if overrides.get("QORTEX_SOURCE_DIR"):
        out["source"] = SourceResource(path=overrides["QORTEX_SOURCE_DIR"])
    return out
