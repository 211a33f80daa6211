"""Snapshots whose checksums pass but whose manifest lies: truncated, not an object, missing an
array or table from its file list, missing or mistyped counts, counts that disagree with the
arrays, a file entry that escapes the folder. The query falls back to the older good snapshot
and says why; with none, one line, exit 2; ``qortex doctor`` names the problem and exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import BRIDGE_QUESTION
from faults import error_line, run_cli

from qortex_core.storage import snapshot as snap


def _without_file(name: str):
    def edit(manifest: dict) -> dict:
        manifest["files"].pop(name)
        return manifest

    return edit


def _counts(value):
    def edit(manifest: dict) -> dict:
        if value is None:
            manifest.pop("counts")
        else:
            manifest["counts"] = value(manifest["counts"])
        return manifest

    return edit


def _escape(manifest: dict) -> dict:
    manifest["files"]["../../evil.npy"] = "0" * 64
    return manifest


# case -> (how the manifest text is rewritten, a word the refusal must hold)
LIES = {
    "truncated": (lambda text: text[: len(text) // 2], "manifest"),
    "a JSON list": (lambda text: "[]", "manifest"),
    "empty object": (lambda text: "{}", "manifest"),
    "no passage_vectors": (_without_file("passage_vectors.npy"), "passage_vectors"),
    "no adjacency data": (_without_file("adj_data.npy"), "adj_data"),
    "no passages table": (_without_file("passages.arrow"), "passages"),
    "no counts": (_counts(None), "counts"),
    "counts not an object": (_counts(lambda c: [1, 2]), "counts"),
    "phrases count a string": (_counts(lambda c: {**c, "phrases": "12"}), "phrases"),
    "phrases count a bool": (_counts(lambda c: {**c, "phrases": True}), "phrases"),
    "file escapes the folder": (_escape, "evil"),
    "phrases count too large": (_counts(lambda c: {**c, "phrases": 10**9}), "phrases"),
    "phrases count negative": (_counts(lambda c: {**c, "phrases": -1}), "phrases"),
    "passages count zero": (_counts(lambda c: {**c, "passages": 0}), "passages"),
    "facts count off by one": (_counts(lambda c: {**c, "facts": c["facts"] + 1}), "facts"),
}


def publish_second(home: Path) -> tuple[str, str]:
    """Republish the home's snapshot as a second version: (older name, newer name)."""
    old = snap.load(home)
    manifest = {k: v for k, v in old.manifest.items() if k not in ("files", "name")}
    new = snap.publish(home, snap.Snapshot(dict(old.arrays), dict(old.tables), manifest))
    return old.path.name, new.name


def lie(home: Path, name: str, case: str) -> None:
    """Rewrite ``name``'s manifest the way ``case`` says (every data file stays intact)."""
    path = snap.snapshots_dir(home) / name / "manifest.json"
    rewrite = LIES[case][0]
    text = path.read_text()
    try:
        out = json.dumps(rewrite(json.loads(text)))
    except (AttributeError, TypeError):
        out = rewrite(text)  # a text edit (truncation, another JSON value)
    path.write_text(out)


@pytest.mark.parametrize("case", sorted(LIES))
def test_a_lying_manifest_falls_back_to_the_older_snapshot(case, toy_home, capsys):
    older, newer = publish_second(toy_home)
    lie(toy_home, newer, case)
    answered = run_cli(capsys, "query", BRIDGE_QUESTION, "--home", toy_home, "--json")
    assert answered.code == 0 and "Traceback" not in answered.stderr, answered.stderr
    result = json.loads(answered.stdout)
    assert result["snapshot"] == older and result["passages"]
    assert newer in result["fallback"] and LIES[case][1] in result["fallback"]


@pytest.mark.parametrize("case", sorted(LIES))
def test_a_lying_manifest_with_nothing_to_fall_back_to_is_one_line(case, toy_home, capsys):
    only = snap.latest_name(toy_home)
    lie(toy_home, only, case)
    failed = run_cli(capsys, "query", BRIDGE_QUESTION, "--home", toy_home)
    error_line(failed, 2, only, LIES[case][1])


@pytest.mark.parametrize(
    "case", ["no passage_vectors", "no counts", "truncated", "phrases count too large"]
)
def test_doctor_names_what_the_manifest_lacks(case, toy_home, capsys):
    older, newer = publish_second(toy_home)
    lie(toy_home, newer, case)
    checked = run_cli(capsys, "doctor", "--home", toy_home, "--no-probe")
    assert checked.code == 1 and "Traceback" not in checked.stderr, checked.stderr
    report = checked.stdout + checked.stderr
    assert newer in report and LIES[case][1] in report
