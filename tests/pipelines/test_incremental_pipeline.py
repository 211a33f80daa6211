"""The Dagster run shows the increment: each stage's metadata says what it added, changed and
removed, whether it ran in full, incrementally or found nothing to do, and why."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from qortex_cli.runs.local import run_ingest

pytestmark = pytest.mark.slow
PAST = time.time() - 3600


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (PAST, PAST))


def test_a_run_after_a_change_and_an_unchanged_run_say_so_in_the_metadata(tmp_path, monkeypatch):
    monkeypatch.setenv("QORTEX_EMBEDDER", "hash:32")
    monkeypatch.setenv("QORTEX_EXTRACTOR", "offline")
    source, home = tmp_path / "src", tmp_path / "home"
    for i in range(4):
        _write(source, f"p{i}.md", f"# Karo{i} Venn\n\nKaro{i} Venn met Ilsa Marr at Orin.\n")
    first = run_ingest(source, home, progress=False).metadata
    assert first["documents"]["mode"] == "full" and first["documents"]["rows_added"] == 4
    assert first["embeddings"]["mode"] == "full"

    _write(source, "p4.md", "# Karo4 Venn\n\nKaro4 Venn met Ilsa Marr at Orin.\n")
    (source / "p0.md").unlink()
    grown = run_ingest(source, home, progress=False).metadata
    docs = grown["documents"]
    assert (docs["rows_added"], docs["rows_changed"], docs["rows_removed"]) == (1, 0, 1)
    assert docs["mode"] == "incremental" and docs["files_read"] == 1
    assert docs["files_unchanged_by_stat"] == 3
    assert grown["chunks"]["rows_added"] == 1 and grown["chunks"]["rows_removed"] == 1
    emb = grown["embeddings"]
    assert emb["mode"] == "incremental" and emb["vectors_kept"] > 0 and emb["rows_added"] > 0

    same = run_ingest(source, home, progress=False).metadata
    assert same["documents"]["files_read"] == 0 and same["documents"]["rows_added"] == 0
    for stage in ("chunks", "embeddings"):
        assert same[stage]["mode"] == "unchanged" and same[stage]["reason"]
    assert same["extractions"]["extracted"] == 0
    assert same["graph_snapshot"]["status"] == "unchanged"
