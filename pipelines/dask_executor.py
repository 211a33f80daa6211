"""``dagster-dask``'s executor, as qortex runs it: each step a task on a ``dask.distributed``
worker (an existing scheduler, or a ``LocalCluster`` started for the run and closed after it).

Three fixes to ``dagster_dask.dask_executor`` (0.29), each needed on the current dask:

- dask (2025+) walks every tuple argument of ``Client.submit`` looking for futures, and Dagster's
  ``@record`` classes are NamedTuples that forbid iteration (``KnownExecutionState`` holds one),
  so the upstream executor fails before its first step; here the step's arguments travel in an
  opaque holder that dask passes through untouched.
- a step whose upstream step failed or was skipped does not run (the upstream executor runs it
  regardless, so a failed blocking check would not stop the snapshot); it reports nothing, and
  the run fails on the upstream failure.
- task keys carry the run id, so a long-lived scheduler does not take a step of a second run for
  the finished step of the first (dagster-io/dagster#21418).

And two additions: a shard step (op tag ``qortex/shard``) prefers worker ``shard mod W``, so the
shards of a stage run on different workers at once; and every worker gets SIGINT and SIGTERM
back if it was started ignoring them (:class:`RestoreInterrupts`).
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence, cast

from dagster import (
    DagsterEvent,
    DagsterEventType,
    executor,
    multiple_process_executor_requirements,
    raise_execution_interrupts,
)
from dagster_dask.executor import (
    DaskExecutor,
    dask_executor,
    get_dask_resource_requirements,
    query_on_dask_worker,
)
from dask.sizeof import sizeof
from distributed.diagnostics.plugin import WorkerPlugin

from assets.sharded import SHARD_TAG
from qortex_core.errors import ConfigError


@sizeof.register(DagsterEvent)
def _event_size(event: DagsterEvent) -> int:
    """A step's events are small; dask's tuple walk would fail on them (and then guess 1 MiB per
    list, which makes the scheduler keep every step on the worker of its upstream step)."""
    return 1024


@dataclass(frozen=True)
class StepArgs:
    """A step's arguments, which dask must not look into (it walks tuples; this is not one)."""

    args: tuple


def _succeeded(events: Sequence[DagsterEvent]) -> bool:
    return any(e.event_type == DagsterEventType.STEP_SUCCESS for e in events)


def run_step(upstream: list[Sequence[DagsterEvent]], payload: StepArgs) -> Sequence[DagsterEvent]:
    """On a dask worker: the step, unless a step it depends on did not succeed.

    Args:
        upstream: the events of each step this one depends on (dask's results of their tasks).
        payload: ``dagster_dask.executor.query_on_dask_worker``'s arguments after the first.
    """
    if not all(_succeeded(events) for events in upstream):
        return []
    return query_on_dask_worker(upstream, *payload.args)


def _events(futures: list[Any]) -> Iterator[DagsterEvent]:
    """Each finished step's events, in finishing order; a Ctrl-C raises between steps."""
    import dask.distributed

    done = iter(dask.distributed.as_completed(futures, with_results=True))
    while True:
        with raise_execution_interrupts():
            item = next(done, None)
        if item is None:
            return
        yield from item[1]


class QortexDaskExecutor(DaskExecutor):
    """Steps as dask tasks, in dependency order (see the module docstring)."""

    def _cluster(self, job_name: str) -> Any:
        if self.cluster_type == "existing":
            return self.cluster_configuration["address"]
        if self.cluster_type == "local":
            from dask.distributed import LocalCluster

            return LocalCluster(**self.build_dict(job_name))
        raise ConfigError(f"dask cluster {self.cluster_type!r}: qortex runs 'existing' or 'local'")

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[DagsterEvent]:
        """Submit every step (``plan_context``: Dagster's orchestration context of the run,
        ``execution_plan``: its plan), then yield each step's events as it finishes."""
        if not plan_context.instance.is_persistent:
            raise ConfigError("the dask executor needs a persistent Dagster instance")
        cluster = self._cluster(plan_context.job_name)
        try:
            with _client(cluster) as client:
                workers = sorted(client.scheduler_info()["workers"])
                futures: dict[str, Any] = {}
                for level in execution_plan.get_steps_to_execute_by_level():
                    for step in level:
                        upstream = [
                            futures[key]
                            for step_input in step.step_inputs
                            for key in step_input.dependency_keys
                        ]
                        futures[step.key] = _submit(
                            client, plan_context, execution_plan, step, upstream, workers
                        )
                yield from _events(list(futures.values()))
        finally:
            if not isinstance(cluster, str):
                cluster.close()


def restore_interrupts() -> None:
    """Give SIGINT its Python handler and SIGTERM its default action where the process ignores
    them, on the main thread only.

    A process started as a background job of a non-interactive shell (``cmd &`` in a script)
    ignores SIGINT, and so do the dask workers it starts. A step's Python subprocesses then
    start ignoring SIGINT too, and Dagster maps SIGTERM onto SIGINT's handling, so they ignore
    SIGTERM: Dagster stops each step's compute-log helper processes with SIGTERM and waits 30 s
    for each, a minute lost per step. An ignored signal stays ignored across ``exec``; a handled
    one does not, so restoring the handler here reaches every process a step starts.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


class RestoreInterrupts(WorkerPlugin):
    """:func:`restore_interrupts` on every worker of the cluster, present and future (a worker
    plugin's ``setup`` runs on the worker's main thread)."""

    name = "qortex-restore-interrupts"

    def setup(self, worker: Any) -> None:
        restore_interrupts()


def _client(cluster: Any) -> Any:
    """A ``dask.distributed.Client`` of ``cluster`` (a scheduler address or a cluster), with
    :class:`RestoreInterrupts` registered on its workers.

    Raises:
        ConfigError: no scheduler answers at the address (or it is no address).
    """
    import dask.distributed

    try:
        client = dask.distributed.Client(cluster)
    except (OSError, ValueError, TypeError) as error:
        if not isinstance(cluster, str):
            raise
        raise ConfigError(
            f"QORTEX_DASK_ADDRESS={cluster!r}: no dask scheduler there ({error})"
        ) from None
    try:
        client.register_plugin(RestoreInterrupts())
    except BaseException:
        client.close()
        raise
    return client


def _placement(tags: Mapping[str, str], workers: list[str]) -> dict[str, Any]:
    """Shard ``i`` (the step's ``qortex/shard`` tag) prefers worker ``i mod W``, so a stage's
    shards spread over the workers instead of following their upstream step's result to one
    worker (dask's locality rule); any worker may still take it."""
    shard = tags.get(SHARD_TAG)
    if shard is None or not workers:
        return {}
    return {"workers": [workers[int(shard) % len(workers)]], "allow_other_workers": True}


def _submit(
    client: Any, plan_context: Any, plan: Any, step: Any, upstream: list[Any], workers: list[str]
) -> Any:
    """One step as a dask task (its upstream steps' futures as its first argument)."""
    run = plan_context.dagster_run
    payload = StepArgs(
        (
            plan_context.reconstructable_job,
            run,
            plan_context.run_config,
            [step.key],
            plan_context.instance.get_ref(),
            plan.known_state,
        )
    )
    return client.submit(
        run_step,
        upstream,
        payload,
        key=f"{run.job_name}.{step.key}.{run.run_id}",
        resources=get_dask_resource_requirements(step.tags),
        pure=False,
        **_placement(step.tags, workers),
    )


@executor(
    name="dask",
    requirements=multiple_process_executor_requirements(),
    config_schema=cast(Any, dask_executor.config_schema),  # a schema object; not in the stubs
)
def qortex_dask_executor(init_context: Any) -> QortexDaskExecutor:
    """The executor definition; config as ``dagster_dask.dask_executor``'s (``cluster``:
    ``existing: {address}`` or ``local: {LocalCluster arguments}``)."""
    ((cluster_type, cluster_configuration),) = init_context.executor_config["cluster"].items()
    return QortexDaskExecutor(cluster_type, cluster_configuration)
