"""A change costs what changed: the documents stage reads only files whose stat moved, the
embedding stage looks up only new texts in the cache and keeps the other rows' vectors, and the
chunks and extraction stages do nothing when their upstream table was not written.

Real files, real LanceDB on disk, the offline extractor and the hash embedder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qortex_core.embed import HashEmbedder, HashEmbedderConfig, token_window
from qortex_core.ingest import stages
from qortex_core.ingest.document_chunks import chunk_stored
from qortex_core.ingest.documents import SourceConfig, read_stored_documents, sync_documents
from qortex_core.ingest.extract import OfflineExtractor
from qortex_core.ingest.source_manifest import record_manifest, scan_documents
from qortex_core.ingest.stage_inputs import remembered
from qortex_core.storage.model import Passage
from qortex_core.storage.store import CONCEPTS, FACTS, PASSAGES, RULES, LanceStore

PAST = time.time() - 3600  # files older than the racy window: their stat can be trusted


def _write(root: Path, name: str, text: str, when: float = PAST) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (when, when))
    return path


def _sync(store: LanceStore, root: Path):
    scan = scan_documents(store, SourceConfig(root))
    report = sync_documents(store, scan.found.documents, scan.found.kept)
    record_manifest(store, scan, report.deleted)
    return scan.found, report


def test_documents_reads_only_files_whose_stat_moved_and_drops_deleted_ones(tmp_path):
    root, store = tmp_path / "src", LanceStore.open(tmp_path / "home")
    _write(root, "a.md", "# Alpha\n\nAlpha text here.\n")
    _write(root, "b.md", "# Beta\n\nBeta text here.\n")
    _write(root, "kb/c.txt", "Gamma lives in the kb folder.\n")
    first, report = _sync(store, root)
    assert len(first.documents) == 3 and first.kept == () and len(report.new) == 3

    # same size, same mtime, same inode: trusted unchanged, so the new bytes are NOT read
    same_size = _write(root, "a.md", "# Alpha\n\nALPHA TEXT HERE.\n")
    again, report = _sync(store, root)
    assert again.documents == () and sorted(again.kept) == ["a.md", "b.md", "kb/c.txt"]
    assert report.unchanged == 3 and not (report.new or report.changed or report.deleted)
    assert (
        "Alpha text" in {d.doc_id: d for d in read_stored_documents(store)}["a.md"].sections[0].text
    )

    # a moved mtime: read, digest compared, changed; a deleted file leaves table and manifest
    os.utime(same_size, (PAST + 10, PAST + 10))
    (root / "b.md").unlink()
    _write(root, "d.md", "# Delta\n\nDelta is new.\n")
    third, report = _sync(store, root)
    assert sorted(d.doc_id for d in third.documents) == ["a.md", "d.md"]
    assert third.kept == ("kb/c.txt",)
    assert report.changed == ("a.md",) and report.new == ("d.md",) and report.deleted == ("b.md",)
    stored = {d.doc_id: d for d in read_stored_documents(store)}
    assert (
        sorted(stored) == ["a.md", "d.md", "kb/c.txt"]
        and "ALPHA" in stored["a.md"].sections[0].text
    )
    assert sorted(store.read("source_manifest")["id"].to_pylist()) == sorted(stored)


def test_each_part_of_the_stat_and_the_stored_signature_is_compared(tmp_path):
    """A file is trusted only when its size, mtime and inode all match the manifest and the
    documents table still holds the signature read then: any one moved, it is read again."""
    root, store = tmp_path / "src", LanceStore.open(tmp_path / "home")
    for name in ("size.md", "inode.md", "signed.md", "same.md"):
        _write(root, name, f"# {name}\n\nText of {name}.\n")
    _sync(store, root)
    _write(root, "size.md", "# size.md\n\nLonger text of size.md.\n")  # same mtime
    swapped = _write(root, "inode.tmp", "# inode.md\n\nTEXT OF INODE.MD.\n")
    os.replace(swapped, root / "inode.md")  # same size and mtime, another inode
    rows = store.read("documents")
    signed = rows.filter(pc.equal(rows["id"], "signed.md"))
    store.upsert(
        "documents",
        signed.set_column(
            signed.schema.get_field_index("signature"), "signature", pa.array(["x/y"])
        ),
    )
    again, report = _sync(store, root)
    assert sorted(d.doc_id for d in again.documents) == ["inode.md", "signed.md", "size.md"]
    assert again.kept == ("same.md",) and sorted(report.changed) == [
        "inode.md",
        "signed.md",
        "size.md",
    ]


def test_a_file_written_just_before_it_was_read_is_read_again(tmp_path):
    """Racy clean: a file modified within the clock's granularity of its read may change again
    without moving its mtime, so the next run reads it once more rather than trusting it."""
    root, store = tmp_path / "src", LanceStore.open(tmp_path / "home")
    _write(root, "fresh.md", "# Fresh\n\nWritten just now.\n", when=time.time())
    _sync(store, root)
    again, _ = _sync(store, root)
    assert [d.doc_id for d in again.documents] == ["fresh.md"] and again.kept == ()


def test_a_changed_redaction_setting_reads_every_file_again(tmp_path):
    root, store = tmp_path / "src", LanceStore.open(tmp_path / "home")
    _write(root, "a.md", "# Alpha\n\nAlpha text.\n")
    _sync(store, root)
    scan = scan_documents(store, SourceConfig(root, domain="other"))
    assert [d.doc_id for d in scan.found.documents] == ["a.md"] and scan.found.kept == ()


def _passages(n: int, start: int = 0) -> list[Passage]:
    return [
        Passage(
            f"Karo{i} Venn met Ilsa{i % 7} Marr at the Orin{i % 5} Station.",
            f"Karo{i} Venn",
            f"doc{i}",
            "d",
        )
        for i in range(start, start + n)
    ]


def _tables(store: LanceStore) -> dict:
    out = {}
    for name in (PASSAGES, CONCEPTS, FACTS, RULES):
        rows = store.read(name)
        out[name] = rows.take(pc.sort_indices(rows["id"])).to_pydict() if rows.num_rows else {}
    return out


def _run(store: LanceStore, home: Path, passages: list[Passage]) -> dict:
    run = stages.IngestRun(
        store, home, OfflineExtractor(), HashEmbedder(HashEmbedderConfig(32)), passages
    )
    return stages.run_stages(run)


def test_embeddings_look_up_only_new_texts_and_equal_a_full_rebuild(tmp_path):
    home = tmp_path / "inc"
    store = LanceStore.open(home)
    first = _run(store, home, _passages(40))["embeddings"]
    assert first.vectors_kept == 0 and first.mode == "full"
    rows = first.passages + first.concepts + first.facts + first.rules

    grown = _passages(40) + _passages(2, start=40)
    report = _run(store, home, grown)["embeddings"]
    looked_up = report.texts_embedded + report.cache_hits
    assert report.mode == "incremental" and report.vectors_kept >= rows - 10
    assert 0 < looked_up <= 10  # the two passages and their new names and facts, not every row

    fresh_home = tmp_path / "full"
    fresh = LanceStore.open(fresh_home)
    _run(fresh, fresh_home, grown)
    inc, full = _tables(store), _tables(fresh)
    for name in (PASSAGES, CONCEPTS, FACTS, RULES):
        assert inc[name].keys() == full[name].keys()
        for column in inc[name]:
            if column == "vector":
                np.testing.assert_allclose(inc[name][column], full[name][column], atol=1e-6)
            elif column != "ingested_at":
                assert inc[name][column] == full[name][column], (name, column)


def test_unchanged_upstream_tables_leave_chunks_extractions_and_embeddings_alone(tmp_path):
    home = tmp_path / "home"
    store = LanceStore.open(home)
    root = tmp_path / "src"
    for i in range(5):
        _write(root, f"p{i}.md", f"# Karo{i} Venn\n\nKaro{i} Venn met Ilsa Marr at Orin.\n")
    _sync(store, root)
    window = token_window(HashEmbedder(HashEmbedderConfig(32)))
    made = chunk_stored(store, window, set())
    assert made.mode == "full" and made.report.added == 5
    _run_after_chunks(store, home)

    again = chunk_stored(store, window, set())
    assert again.mode == "unchanged" and again.passages == [] and again.report.total == 5
    ex = stages.extract_chunks(store, OfflineExtractor())
    emb = stages.embed_index(
        store, HashEmbedder(HashEmbedderConfig(32)), OfflineExtractor().cache_key
    )
    assert (ex.extracted, ex.cached) == (0, 5) and emb.mode == "unchanged"

    _write(root, "p5.md", "# Karo5 Venn\n\nKaro5 Venn met Ilsa Marr at Orin.\n")
    _sync(store, root)
    grown = chunk_stored(store, window, set())
    assert grown.mode == "incremental" and grown.report.added == 1 and grown.report.total == 6


def _run_after_chunks(store: LanceStore, home: Path) -> None:
    stages.extract_chunks(store, OfflineExtractor())
    stages.embed_index(store, HashEmbedder(HashEmbedderConfig(32)), OfflineExtractor().cache_key)


def test_a_remembered_check_runs_again_only_after_its_tables_are_written(tmp_path):
    store = LanceStore.open(tmp_path / "home")
    store.upsert("chunks", pa.table({"id": ["a"], "text": ["x"]}))
    calls: list[int] = []

    def count() -> dict:
        calls.append(1)
        return {"rows": store.count("chunks")}

    assert remembered(store, "rows", ("chunks",), count) == {"rows": 1}
    assert remembered(store, "rows", ("chunks",), count) == {"rows": 1} and len(calls) == 1
    store.upsert("chunks", pa.table({"id": ["b"], "text": ["y"]}))
    assert remembered(store, "rows", ("chunks",), count) == {"rows": 2} and len(calls) == 2
    assert remembered(store, "rows", ("chunks",), count, "other") == {"rows": 2}
    assert len(calls) == 3  # other settings: computed again


def test_a_symlinked_file_is_judged_by_its_target(tmp_path):
    root, store = tmp_path / "src", LanceStore.open(tmp_path / "home")
    target = _write(root, ".kept/real.md", "# Real\n\nThe first text.\n")  # hidden: not listed
    (root / "link.md").symlink_to(target)
    os.utime(root / "link.md", (PAST, PAST), follow_symlinks=False)  # the link itself: old too
    first, _ = _sync(store, root)
    assert [d.doc_id for d in first.documents] == ["link.md"]
    _write(root, ".kept/real.md", "# Real\n\nThe other text.\n", when=PAST + 5)
    again, report = _sync(store, root)
    assert [d.doc_id for d in again.documents] == ["link.md"] and report.changed == ("link.md",)
