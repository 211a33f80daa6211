"""The library and the CLI's library commands never import Dagster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import qortex_core
names = sorted(m.name for m in pkgutil.walk_packages(qortex_core.__path__, "qortex_core."))
for name in names:
    importlib.import_module(name)
print(json.dumps({"modules": names, "dagster": sorted(m for m in sys.modules if m.split(".")[0].startswith("dagster"))}))
"""


def run_python(code: str, *args: str, env: dict | None = None) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, **(env or {})),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_qortex_core_and_all_submodules_import_without_dagster():
    out = run_python(IMPORT_ALL)
    expected = sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "qortex_core").rglob("*.py")
        if p != REPO / "qortex_core" / "__init__.py"
    )
    assert out["modules"] == expected
    assert out["dagster"] == []


CLI_RUN = """
import contextlib, io, json, sys
from qortex_cli import main as cli
parser = cli.build_parser()  # imports every COMMAND_MODULES entry
codes = []
for argv in (["query", "hello", "--home", sys.argv[1]], ["eval", "--questions", sys.argv[1] + "/q.json",
             "--corpus", sys.argv[1] + "/c.json", "--home", sys.argv[1]]):
    with contextlib.redirect_stderr(io.StringIO()):
        codes.append(cli.main(argv))
print(json.dumps({"codes": codes, "dagster": sorted(m for m in sys.modules if m.split(".")[0].startswith("dagster"))}))
"""


def test_cli_query_and_eval_do_not_import_dagster(tmp_path):
    # both commands run up to their first user error (no snapshot, no questions file) in one process
    out = run_python(CLI_RUN, str(tmp_path), env={"QORTEX_HOME": str(tmp_path)})
    assert out["codes"] == [2, 2]
    assert out["dagster"] == []


@pytest.mark.parametrize(
    "module", ["qortex_cli.main", "qortex_cli.commands.ingest", "qortex_cli.commands.bench"]
)
def test_command_modules_import_without_dagster(module):
    out = run_python(
        f"import json, sys, {module}\n"
        "print(json.dumps({'dagster': sorted(m for m in sys.modules if m.startswith('dagster'))}))"
    )
    assert out["dagster"] == []
