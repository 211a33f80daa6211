"""Dagster loggers of the in-process runs: compact progress on stderr, or nothing."""

from __future__ import annotations

import logging
import sys

from dagster import DagsterEventType, logger

from qortex_core.ingest.stages import STAGE_NAMES


class _StderrProgress(logging.Handler):
    """Asset step ends, check results, failures and the assets' own INFO/WARNING lines,
    compactly."""

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "dagster_meta", None) or {}
        event, step = meta.get("dagster_event"), meta.get("step_key") or ""
        message = meta.get("orig_message", record.getMessage())
        if event is not None:
            kind = event.event_type
            if kind == DagsterEventType.STEP_SUCCESS and step in STAGE_NAMES:
                line = f"qortex: {step} done ({message.rsplit(' in ', 1)[-1].rstrip('.')})"
            elif kind == DagsterEventType.STEP_FAILURE:
                line = f"qortex: {step} FAILED"
            elif kind == DagsterEventType.ASSET_CHECK_EVALUATION:
                data = event.event_specific_data
                line = f"qortex: check {data.check_name}: {'passed' if data.passed else 'FAILED'}"
            else:
                return
        elif record.levelno >= logging.INFO:
            line = f"  {step}: {message}" if step else f"  {message}"
        else:
            return
        print(line, file=sys.stderr, flush=True)


@logger(description="compact progress on stderr")
def stderr_progress(_init_context) -> logging.Logger:
    log = logging.getLogger("qortex.ingest.progress")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    if not log.handlers:
        log.addHandler(_StderrProgress())
    return log


@logger(description="no output")
def quiet(_init_context) -> logging.Logger:
    log = logging.getLogger("qortex.ingest.quiet")
    log.propagate = False
    log.setLevel(logging.CRITICAL + 1)
    return log


LOGGERS = {"progress": stderr_progress, "quiet": quiet}  # the run config picks one by name
