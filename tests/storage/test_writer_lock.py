"""One writer per home: a second writer fails fast naming the first; kill -9 leaves a stale lock
that the next writer takes over; a reused pid is not mistaken for the holder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qortex_core.storage.writer_lock import (
    LOCK_NAME,
    HomeBusyError,
    current_holder,
    ensure_no_other_writer,
    process_start,
    read_holder,
    writer_lock,
)

HOLD = """
import sys, time
from qortex_core.storage.writer_lock import writer_lock
with writer_lock(sys.argv[1], "qortex ingest"):
    print("held", flush=True)
    time.sleep(60)
"""


def _holder_process(home: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_writer_fails_fast_and_kill_9_leaves_a_stale_lock(tmp_path):
    home = tmp_path / "home with space ?%"
    proc = _holder_process(home)
    try:
        started = time.monotonic()
        with pytest.raises(HomeBusyError) as err:
            with writer_lock(home, "qortex purge"):
                pass
        assert time.monotonic() - started < 5  # fails fast, does not wait
        message = str(err.value)
        assert f"pid {proc.pid}" in message and "qortex ingest" in message and "\n" not in message
        assert current_holder(home).pid == proc.pid
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (home / LOCK_NAME).exists()  # the file survives kill -9 ...
    assert read_holder(home).pid == proc.pid and current_holder(home) is None  # ... as stale
    with writer_lock(home, "qortex ingest") as me:
        assert me.pid == os.getpid() and read_holder(home) == me
        with writer_lock(home, "nested") as again:  # re-entrant within one process
            assert again == me
        assert read_holder(home) == me
    assert not (home / LOCK_NAME).exists()


def test_a_reused_pid_with_another_start_time_is_stale(tmp_path):
    me = os.getpid()
    fake = {"pid": me, "start": "1", "host": os.uname().nodename, "what": "old", "since": 0.0}
    (tmp_path / LOCK_NAME).write_text(json.dumps(fake))
    assert process_start(me) not in ("", "1")
    assert current_holder(tmp_path) is None
    with writer_lock(tmp_path, "new") as holder:
        assert holder.what == "new"


def test_a_run_not_holding_the_lock_stops_while_another_process_writes(tmp_path):
    """What a run launched from the UI meets (its documents step) while `qortex ingest` runs."""
    from dagster import build_asset_context

    from assets.documents import documents
    from pipelines.jobs import WRITER_TAG, make_ingest_job
    from pipelines.resources import SourceResource, StoreResource

    home, source = tmp_path / "home", tmp_path / "src"
    source.mkdir()
    (source / "a.md").write_text("# A\n\nAlpha is a letter.\n")
    ensure_no_other_writer(home)  # nobody writes: fine
    with writer_lock(home, "qortex ingest"):
        ensure_no_other_writer(home)  # this process holds it (a CLI run around its job): fine
    proc = _holder_process(home)
    try:
        with pytest.raises(HomeBusyError, match=f"pid {proc.pid}"):
            documents(
                build_asset_context(),
                source=SourceResource(path=str(source)),
                store=StoreResource(home=str(home)),
            )
        assert not (home / "lancedb").exists()  # stopped before writing anything
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert make_ingest_job({}).tags[WRITER_TAG] == "ingest"  # queued runs: one at a time
