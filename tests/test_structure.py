"""Structure facts anyone can re-measure: module and function sizes, no import cycle, layering.

Read from the source with ``ast`` (nothing is imported). First-party packages: qortex_core,
qortex_bench, assets, pipelines, qortex_cli. Imports under ``if TYPE_CHECKING:`` count like any
other: a cycle or an upward import hidden from the interpreter is still one for a reader.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("qortex_core", "qortex_bench", "assets", "pipelines", "qortex_cli")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# Functions allowed over MAX_FUNCTION_LINES, by dotted name; split a long function rather
# than list it here.
KNOWN_LONG_FUNCTIONS: set[str] = set()


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every first-party module."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def imports_of(name: str) -> set[str]:
    """First-party modules ``name`` imports: at module level, inside functions or under
    ``TYPE_CHECKING``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {name: imports_of(name) for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_no_module_over_400_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_60_lines() -> None:
    long = {}
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{path.relative_to(REPO)}:{node.name}"
                if lines > MAX_FUNCTION_LINES and key not in KNOWN_LONG_FUNCTIONS:
                    long[key] = lines
    assert long == {}


def test_no_import_cycle_among_first_party_modules() -> None:
    assert import_cycles() == []


def test_cycle_finder_sees_a_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above could fail: two modules importing each other are found."""
    fake = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    monkeypatch.setattr(sys.modules[__name__], "MODULES", dict.fromkeys(fake, Path()))
    monkeypatch.setattr(sys.modules[__name__], "imports_of", lambda name: fake[name])
    assert import_cycles() == [["a", "b"]]


def test_qortex_core_imports_nothing_from_the_outer_layers() -> None:
    outer = ("assets", "pipelines", "qortex_bench", "qortex_cli")
    found = {
        name: sorted(t for t in imports_of(name) if t.split(".")[0] in outer)
        for name in MODULES
        if name.split(".")[0] == "qortex_core"
    }
    assert {k: v for k, v in found.items() if v} == {}


# qortex_core's layers, lowest first: a module may import its own layer and those below it,
# never one above. Each entry: layer name -> module or package prefixes (longest prefix wins).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("errors", "settings", "redact", "jsonable", "cores")),
    ("storage", ("storage",)),
    ("embed/llm", ("embed", "embed_device", "embed_width", "llm")),
    ("ingest", ("ingest",)),
    ("memory/feedback", ("memory", "feedback")),
    ("query", ("query",)),
    ("agent", ("agent",)),
    ("ops/serving", ("ops", "serving", "mcp_server")),
)


def layer_of(name: str) -> int | None:
    """Index in :data:`LAYERS` of a ``qortex_core`` module (``None``: the lazy root package or
    a module no layer claims)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            full = f"qortex_core.{prefix}"
            if name == full or name.startswith(full + "."):
                if best is None or len(full) > best[0]:
                    best = (len(full), rank)
    return None if best is None else best[1]


def upward_imports() -> list[str]:
    """``module (layer) -> imported module (higher layer)``, for every qortex_core import that
    points up the layer order."""
    found = []
    for name in MODULES:
        low = layer_of(name)
        if low is None:
            continue
        for target in sorted(imports_of(name)):
            high = layer_of(target)
            if high is not None and high > low:
                found.append(f"{name} ({LAYERS[low][0]}) -> {target} ({LAYERS[high][0]})")
    return sorted(found)


def test_every_qortex_core_module_has_a_layer() -> None:
    unplaced = [n for n in MODULES if n.startswith("qortex_core.") and layer_of(n) is None]
    assert unplaced == []


def test_qortex_core_imports_only_down_the_layer_order() -> None:
    assert upward_imports() == []


def test_layer_check_sees_an_upward_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above could fail: storage importing query is reported, query importing
    storage is not."""
    fake = {
        "qortex_core.storage.store": {"qortex_core.query.retriever"},
        "qortex_core.query.retriever": {"qortex_core.storage.store"},
    }
    monkeypatch.setattr(sys.modules[__name__], "MODULES", dict.fromkeys(fake, Path()))
    monkeypatch.setattr(sys.modules[__name__], "imports_of", lambda name: fake[name])
    assert upward_imports() == [
        "qortex_core.storage.store (storage) -> qortex_core.query.retriever (query)"
    ]


def test_resources_are_a_leaf_and_definitions_the_only_root() -> None:
    pipelines = {n for n in MODULES if n.split(".")[0] in ("assets", "pipelines")}
    assert {t for t in imports_of("pipelines.resources") if t in pipelines} == set()
    importers = {n for n in MODULES for t in imports_of(n) if t == "pipelines.definitions"}
    # the CLI's runs build the same location (in process, or rebuilt by an executor's steps)
    assert importers <= {"qortex_cli.runs.local", "qortex_cli.runs.executed"}
    dagster_private = [name for name in pipelines if "dagster._core" in MODULES[name].read_text()]
    assert dagster_private == []


def test_no_module_imports_another_modules_private_names() -> None:
    private = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] in PACKAGES:
                    private += [
                        f"{name}: {node.module}.{a.name}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                    ]
    assert private == []


def test_the_dagster_project_never_imports_the_cli() -> None:
    """``pipelines/`` and ``assets/`` are the Dagster project the webserver loads: the CLI
    (``qortex_cli``) sits above them and nothing below imports it."""
    below = ("qortex_core", "assets", "pipelines", "qortex_bench")
    found = {
        name: sorted(t for t in imports_of(name) if t.split(".")[0] == "qortex_cli")
        for name in MODULES
        if name.split(".")[0] in below
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_pipelines_holds_only_the_dagster_project() -> None:
    """One module each: definitions, resources, jobs (with the dask executor), schedules,
    sensors and checks; the command line lives in ``qortex_cli``."""
    modules = {n for n in MODULES if n.split(".")[0] == "pipelines"}
    expected = {"definitions", "resources", "jobs", "dask_executor", "schedules", "sensors"}
    assert modules == {"pipelines"} | {f"pipelines.{m}" for m in expected | {"checks"}}
