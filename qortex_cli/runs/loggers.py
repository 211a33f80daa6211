"""Dagster loggers of the in-process runs: compact progress on stderr, or nothing."""

from __future__ import annotations

import logging
import re
import sys

from dagster import DagsterEventType, Field, logger

from qortex_cli.bars import StageProgress
from qortex_core.ingest.stages import STAGE_NAMES

_COUNT = re.compile(r"(\S+): (\d+)/(\d+)")  # an asset's "stage: done/total" line


class _StderrProgress(logging.Handler):
    """Asset step ends, check results, failures and the assets' own INFO/WARNING lines,
    compactly; an asset's ``stage: done/total`` lines as a bar with rate and ETA on a terminal
    (:class:`~qortex_cli.bars.StageProgress`), as they are otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = StageProgress()

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event, step = meta.get("dagster_event"), meta.get("step_key") or ""
        message = meta.get("orig_message", record.getMessage())
        if event is not None:
            line = _event_line(event, step, message)
            if line is None:
                return
            self.stages.close()
        elif record.levelno >= logging.INFO:
            count = _COUNT.fullmatch(message.strip())
            if count is not None:
                stage, done, total = count.groups()
                self.stages(f"{step}: {stage}" if step else stage, int(done), int(total))
                return
            line = f"  {step}: {message}" if step else f"  {message}"
        else:
            return
        print(line, file=sys.stderr, flush=True)


def _event_line(event, step: str, message: str) -> str | None:
    """The line of a step's end, failure or check result (None: an event not shown)."""
    kind = event.event_type
    if kind == DagsterEventType.STEP_SUCCESS and step in STAGE_NAMES:
        return f"qortex: {step} done ({message.rsplit(' in ', 1)[-1].rstrip('.')})"
    if kind == DagsterEventType.STEP_FAILURE:
        return f"qortex: {step} FAILED"
    if kind == DagsterEventType.ASSET_CHECK_EVALUATION:
        data = event.event_specific_data
        return f"qortex: check {data.check_name}: {'passed' if data.passed else 'FAILED'}"
    return None


@logger(
    config_schema={"bars": Field(bool, is_required=False, default_value=False)},
    description="compact progress on stderr (bars: with rate and ETA, for a terminal)",
)
def stderr_progress(init_context) -> logging.Logger:
    """The progress logger; ``bars`` is decided by the process that started the run (a step's
    own stderr is Dagster's capture, never the terminal)."""
    log = logging.getLogger("qortex.ingest.progress")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    if not log.handlers:
        log.addHandler(_StderrProgress())
    for handler in log.handlers:
        if isinstance(handler, _StderrProgress):
            handler.stages.tty = bool((init_context.logger_config or {}).get("bars", False))
    return log


@logger(config_schema=None, description="no output")
def quiet(_init_context) -> logging.Logger:
    log = logging.getLogger("qortex.ingest.quiet")
    log.propagate = False
    log.setLevel(logging.CRITICAL + 1)
    return log


LOGGERS = {"progress": stderr_progress, "quiet": quiet}  # the run config picks one by name
