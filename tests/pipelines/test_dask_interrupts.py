"""Dask workers started by a process that ignores SIGINT (a background job of a non-interactive
shell: ``nohup qortex ingest &`` from a script, cron) get SIGINT and SIGTERM back through the
executor's client, so a subprocess a step starts stops on SIGTERM. Without it Dagster's
compute-log helpers ignore SIGTERM and each step waits a minute for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `cmd &` in a non-interactive shell leaves

from dask.distributed import Client, LocalCluster

from pipelines.dask_executor import _client


def stop_child(wait):
    # a Python subprocess of a step, mapping SIGTERM onto SIGINT's handling as Dagster does
    code = (
        "from dagster._utils.interrupts import setup_interrupt_handlers as s; s(); "
        "import time; print('ready', flush=True); time.sleep(120)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    child.stdout.readline()
    child.terminate()
    try:
        child.wait(timeout=wait)
        return "stopped"
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        return "ignored SIGTERM"


if __name__ == "__main__":
    with LocalCluster(
        n_workers=1, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        with Client(cluster) as plain:
            print("plain", plain.submit(stop_child, 3, pure=False).result(), flush=True)
        with _client(cluster) as ours:
            print("qortex", ours.submit(stop_child, 60, pure=False).result(), flush=True)
"""


def test_workers_of_a_process_ignoring_sigint_stop_step_subprocesses_on_sigterm(tmp_path):
    script = tmp_path / "ignoring.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert lines.get("plain") == "ignored SIGTERM"  # the condition, reproduced
    assert lines.get("qortex") == "stopped"
