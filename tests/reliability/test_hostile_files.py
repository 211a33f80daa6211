"""Hostile files and homes (issue 35, items 12, 13, 15, 17-19): a source file swapped for a symlink
to an outside file between listing and reading, a bad ``profiles.json``, ``LATEST`` pointing
outside the home, ``~`` in a home, a CLI query before the first snapshot, and ``update`` of a
passage id.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from faults import error_line, run_cli

import qortex_core
from qortex_core.agent.api import Memory
from qortex_core.embed import make_embedder
from qortex_core.errors import ConfigError, RecordError
from qortex_core.ingest import documents
from qortex_core.ingest.documents import SourceConfig, load_documents
from qortex_core.query.profiles import get_profile, load_profiles
from qortex_core.query.retriever import Retriever
from qortex_core.storage import snapshot as snap

SECRET = "OUTSIDE FILE: the quiet heron sleeps in Vellmark harbour"  # plain words: never redacted
GOOD = "# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside every source root and home, holding a secret."""
    path = tmp_path / "outside" / "secret.md"
    path.parent.mkdir()
    path.write_text(f"# Secret\n\n{SECRET}\n")
    return path


def _loaded_text(found) -> str:
    return " ".join(s.text for d in found.documents for s in d.sections)


# -- item 12: a source swapped between listing and reading --------------------------------
def _swap_on_read(monkeypatch, name: str, swap) -> None:
    """Run ``swap()`` just before ``name`` is read, after the listing saw the original."""
    real = documents.read_document

    def reading(path, config, *rest):
        if path.name == name:
            swap(path)
        return real(path, config, *rest)

    monkeypatch.setattr(documents, "read_document", reading)


def _to_symlink(target: Path):
    def swap(path: Path) -> None:
        path.unlink()
        path.symlink_to(target)

    return swap


def _to_hard_link(target: Path):
    def swap(path: Path) -> None:
        path.unlink()
        os.link(target, path)

    return swap


@pytest.mark.parametrize(
    ("make_swap", "word"),
    [(_to_symlink, "symlink"), (_to_hard_link, "replaced")],
    ids=["symlink", "hard-link"],
)
def test_a_source_swapped_after_the_listing_is_skipped_never_read(
    tmp_path, outside, monkeypatch, make_swap, word
):
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "good.md").write_text(GOOD)
    (src / "link.md").symlink_to(src / "a" / "good.md")  # inside the root: still read
    (src / "notes.md").write_text("# Notes\n\nHarmless notes about Lune.\n")
    _swap_on_read(monkeypatch, "notes.md", make_swap(outside))
    found = load_documents(SourceConfig(root=src))
    assert SECRET not in _loaded_text(found)
    assert [d.doc_id for d in found.documents] == ["a/good.md"]
    reasons = {s.path: s.reason for s in found.skipped}
    assert reasons["link.md"] == "duplicate of a/good.md"  # read, and found to repeat a/good.md
    assert word in reasons["notes.md"], reasons


def test_a_folder_swapped_for_a_symlink_after_the_listing_is_not_followed(
    tmp_path, outside, monkeypatch
):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "secret.md").write_text("# Notes\n\nHarmless.\n")  # the name outside has

    def swap(path: Path) -> None:
        (src / "sub").rename(tmp_path / "moved")
        (src / "sub").symlink_to(outside.parent)

    _swap_on_read(monkeypatch, "secret.md", swap)
    found = load_documents(SourceConfig(root=src))
    assert SECRET not in _loaded_text(found) and found.documents == ()
    assert "symlink" in {s.path: s.reason for s in found.skipped}["sub/secret.md"]


FLIP = """
import os, sys
target, outside, staged_file, staged_link = sys.argv[1:5]
while True:
    os.symlink(outside, staged_link)
    os.replace(staged_link, target)  # atomic: the name is a symlink now
    with open(staged_file, "w") as fh:
        fh.write("# Notes\\n\\nHarmless notes.\\n")
    os.replace(staged_file, target)  # and a regular file again
"""


def test_a_source_flipping_to_a_symlink_while_loading_never_leaks(tmp_path, outside):
    """The race as it happens: another process flips the file while loads run."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.md").write_text(GOOD)
    for n in range(30):  # read before the flipped file: the window between listing and reading
        (src / f"f{n:02d}.md").write_text(f"# Filler {n}\n\nFiller number {n}.\n")
    target = src / "zz.md"
    target.write_text("# Notes\n\nHarmless notes.\n")
    args = [target, outside, tmp_path / "file.md", tmp_path / "ln.md"]
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, *map(str, args)])
    try:
        loads = [load_documents(SourceConfig(root=src)) for _ in range(60)]
    finally:
        flipper.kill()
        flipper.wait(10)
    assert not [n for n, found in enumerate(loads) if SECRET in _loaded_text(found)]
    assert all("good.md" in [d.doc_id for d in found.documents] for found in loads)
    flips = sum("zz.md" in [s.path for s in found.skipped] for found in loads)
    assert flips, "the flipper never raced a load"  # the race was really run


# -- item 13: profiles.json ---------------------------------------------------------------
BAD_PROFILES = {
    "string-half-life": ('{"mine": {"recency": 0.5, "recency_half_life_days": "30"}}', "half_life"),
    "negative-half-life": ('{"mine": {"recency": 0.5, "recency_half_life_days": -3}}', "half_life"),
    "zero-half-life": ('{"mine": {"recency": 0.5, "recency_half_life_days": 0}}', "half_life"),
    "nan-half-life": ('{"mine": {"recency": 0.5, "recency_half_life_days": NaN}}', "half_life"),
    "huge-weight": ('{"mine": {"relevance": 1e308, "recency": 1e308}}', "relevance"),
    "infinite-weight": ('{"mine": {"salience": Infinity}}', "salience"),
    "negative-weight": ('{"mine": {"relevance": 1, "preference": -0.5}}', "preference"),
    "bool-weight": ('{"mine": {"relevance": true}}', "relevance"),
    "string-weight": ('{"mine": {"relevance": "0.7"}}', "relevance"),
    "no-weight": ('{"mine": {"relevance": 0}}', "positive sum"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_a_bad_profiles_file_is_one_line_naming_the_file_and_field(tmp_path, case):
    text, field = BAD_PROFILES[case]
    (tmp_path / "profiles.json").write_text(text)
    for call in (lambda: load_profiles(tmp_path), lambda: get_profile("mine", tmp_path)):
        with pytest.raises(ConfigError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and "profiles.json" in message and field in message
        assert "'mine'" in message
    (tmp_path / "profiles.json").write_text('{"mine": {"relevance": 0.8, "recency": 0.2}}')
    assert get_profile("mine", tmp_path).recency == 0.2  # a good file still loads


def test_the_cli_query_refuses_a_bad_profiles_file_with_exit_2(toy_home, capsys):
    (toy_home / "profiles.json").write_text(BAD_PROFILES["string-half-life"][0])
    asked = run_cli(capsys, "query", "Orlan Vesk", "--profile", "mine", "--home", toy_home)
    error_line(asked, 2, "profiles.json", "recency_half_life_days", "'mine'")


# -- item 15: LATEST pointing outside the home --------------------------------------------
def _break_pointer(home: Path, how: str, outside: Path) -> None:
    pointer = home / "snapshots" / snap.POINTER
    pointer.unlink()
    if how == "symlink":
        pointer.symlink_to(outside)
    elif how == "junk":
        pointer.write_text(outside.read_text())
    elif how == "fifo":
        os.mkfifo(pointer)
    else:
        pointer.symlink_to("/dev/zero")


@pytest.mark.parametrize("how", ["symlink", "junk", "fifo", "device"])
def test_doctor_and_fallback_never_echo_a_pointer_s_target(toy_home, outside, capsys, how):
    _break_pointer(toy_home, how, outside)
    box: dict = {}
    worker = threading.Thread(
        target=lambda: box.update(
            out=run_cli(capsys, "doctor", "--home", toy_home, "--no-probe", "--json")
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "doctor blocked on the pointer"
    checked = box["out"]
    assert checked.code == 1 and "Traceback" not in checked.stderr
    pointer = next(c for c in json.loads(checked.stdout)["checks"] if c["name"] == "pointer")
    assert "not a valid pointer" in pointer["detail"]
    assert "OUTSIDE" not in checked.stdout + checked.stderr
    with pytest.raises(Exception, match="not a valid pointer") as caught:
        snap.latest_name(toy_home)
    assert "OUTSIDE" not in str(caught.value)


def test_the_query_fallback_never_echoes_a_pointer_s_target(toy_home, outside, capsys):
    _break_pointer(toy_home, "symlink", outside)
    asked = run_cli(capsys, "query", "Where was Orlan Vesk born?", "--home", toy_home, "--json")
    assert asked.code == 0, asked.stderr
    fallback = json.loads(asked.stdout)["fallback"]
    assert "not a valid pointer" in fallback and "OUTSIDE" not in asked.stdout


def test_a_manifest_symlinked_to_an_outside_file_is_not_quoted(toy_home, tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"format": 2, "files": {"OUTSIDE FILE key": "x"}}))
    folder = toy_home / "snapshots" / snap.latest_name(toy_home)
    (folder / "manifest.json").unlink()
    (folder / "manifest.json").symlink_to(outside)
    checked = run_cli(capsys, "doctor", "--home", toy_home, "--no-probe", "--json")
    assert checked.code == 1 and "OUTSIDE" not in checked.stdout + checked.stderr
    assert "symlink" in checked.stdout


# -- item 17: ~ in a home -----------------------------------------------------------------
def test_a_home_given_with_tilde_finds_its_snapshot_everywhere(
    toy_home, embedder, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    shutil.copytree(toy_home, tmp_path / "user" / ".qortex")
    assert snap.latest_name("~/.qortex").startswith("v")
    assert Retriever.open("~/.qortex", embedder=embedder).view.name.startswith("v")
    mem = qortex_core.open("~/.qortex", embedder=embedder)
    mem.remember("Orlan Vesk collects brass instruments.")
    tiers = {h.tier for h in mem.search("Where was Orlan Vesk born?", top_k=5).passages}
    assert "graph" in tiers
    monkeypatch.setenv("QORTEX_HOME", "~/.qortex")
    assert Memory(embedder=embedder).retriever() is not None
    for argv in (["doctor", "--no-probe"], ["snapshots"], ["memories"]):
        done = run_cli(capsys, *argv, "--home", "~/.qortex", "--json")
        assert done.code == 0, (argv, done.stderr)
    assert "brass" in run_cli(capsys, "memories", "--home", "~/.qortex").stdout
    assert not (Path.cwd() / "~").exists()  # nothing made under a literal "~" folder


# -- item 18: the CLI query before the first snapshot -------------------------------------
def test_cli_query_answers_from_fresh_memories_before_any_snapshot(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:64")
    home = tmp_path / "home"
    fact = "The Ventra Bridge was painted red by the Osk Brothers."
    for tenant in ([], ["--tenant", "t1"]):
        done = run_cli(capsys, "remember", fact, "--home", home, "--json", *tenant)
        rid = json.loads(done.stdout)["id"]
        asked = run_cli(capsys, "query", "Ventra Bridge painted", "--home", home,
                        "--min-relevance", "0", "--json", *tenant)  # fmt: skip
        assert asked.code == 0, asked.stderr
        hits = json.loads(asked.stdout)["passages"]
        assert [(h["id"], h["tier"]) for h in hits] == [(rid, "fresh")]
        text = run_cli(capsys, "query", "Ventra Bridge painted", "--home", home,
                       "--min-relevance", "0", *tenant)  # fmt: skip
        assert text.code == 0 and rid in text.stdout and "fresh" in text.stdout
    empty = tmp_path / "nothing"
    error_line(run_cli(capsys, "query", "x", "--home", empty), 2, "no snapshot published")
    assert not empty.exists()


# -- item 19: update of a passage id ------------------------------------------------------
def test_update_of_a_passage_id_says_which_commands_take_it(toy_home, capsys):
    passage = snap.load(toy_home, verify=False).tables["passages"]["id"][0].as_py()
    done = run_cli(capsys, "update", passage, "new text", "--home", toy_home)
    error_line(done, 2, "passage of an ingested file", "forget, history and get take p_ ids")
    mem = Memory(toy_home, embedder=make_embedder("hash:64"))
    with pytest.raises(RecordError, match="changes only with its file"):
        mem.update(passage, "new text")
    assert mem.history(passage)[0].op == "ingest"  # history still takes it
    from qortex_core.mcp_server import build_server

    tools = {t.name: t for t in asyncio.run(build_server().list_tools())}
    update_id = tools["qortex_update"].input_schema["properties"]["id"]["description"]
    assert "m_" in update_id and "cannot be updated" in update_id
    assert "m_... ids only" in tools["qortex_update"].description
    for name in ("qortex_forget", "qortex_history"):
        assert "p_" in tools[name].input_schema["properties"]["id"]["description"]
    help_text = run_cli_help(capsys, "update")
    assert "p_" in help_text and "changes only with its file" in help_text


def run_cli_help(capsys, command: str) -> str:
    """``qortex COMMAND --help`` as printed."""
    from qortex_cli import main as cli

    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args([command, "--help"])
    return " ".join(capsys.readouterr().out.split())
