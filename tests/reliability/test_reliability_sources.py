"""Bad sources: symlink loops, a 50 MB file, binary, invalid UTF-8, empty and malformed corpus files are skipped
with a reason and the rest loads."""

from __future__ import annotations

import os

from qortex_core.ingest.documents import SourceConfig, load_documents


def test_bad_sources_are_skipped_with_reasons_and_the_rest_loads(tmp_path):
    src = tmp_path / "src"
    (src / "notes").mkdir(parents=True)
    (src / "notes" / "good.md").write_text(
        "# Orlan Vesk\n\nOrlan Vesk is a composer born in Ostrania.\n"
    )
    os.symlink("self.md", src / "self.md")  # a loop on itself
    os.symlink("b.md", src / "a.md")  # a loop through two links
    os.symlink("a.md", src / "b.md")
    os.symlink("..", src / "notes" / "up")  # a directory loop
    os.symlink(tmp_path, src / "escape")  # a directory outside the root
    with open(src / "huge.txt", "wb") as fh:  # 50 MB, sparse
        fh.truncate(50 * 1024 * 1024)
    (src / "bin.md").write_bytes(b"\x00\x01\x02\x03")
    (src / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (src / "empty.md").write_bytes(b"")
    (src / "broken.json").write_text('[{"title": "x", "text": ')
    (src / "wrong.json").write_text('{"title": "x"}')

    found = load_documents(SourceConfig(root=src))
    assert [d.doc_id for d in found.documents] == ["notes/good.md"]
    reasons = {s.path: s.reason for s in found.skipped}
    assert set(reasons) == {
        "self.md",
        "a.md",
        "b.md",
        "notes/up",
        "escape",
        "huge.txt",
        "bin.md",
        "latin1.txt",
        "empty.md",
        "broken.json",
        "wrong.json",
    }
    assert all(r.strip() for r in reasons.values())
    assert "outside" in reasons["escape"] and "not followed" in reasons["notes/up"]
    assert (
        "binary" in reasons["huge.txt"]
        and "UTF-8" in reasons["latin1.txt"]
        and "empty" in reasons["empty.md"]
    )
    assert "JSON" in reasons["broken.json"] and "list" in reasons["wrong.json"]


def test_a_file_over_the_size_limit_is_skipped(tmp_path):
    (tmp_path / "big.txt").write_text("Ivo Lark paints harbours. " * 100)
    (tmp_path / "small.txt").write_text("Ivo Lark paints harbours.")
    found = load_documents(SourceConfig(root=tmp_path, max_bytes=1000))
    assert [d.doc_id for d in found.documents] == ["small.txt"]
    assert [(s.path, s.reason) for s in found.skipped] == [("big.txt", "larger than 1000 bytes")]


def test_a_duplicate_document_is_skipped_with_the_file_it_repeats(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    text = "Ada Lovelace wrote the first program for the Analytical Engine.\n"
    (tmp_path / "a" / "notes.md").write_text(text)
    (tmp_path / "b" / "copy.md").write_text(text)
    (tmp_path / "b" / "other.md").write_text(text + "And Charles Babbage designed it.\n")
    found = load_documents(SourceConfig(root=str(tmp_path)))
    assert [d.doc_id for d in found.documents] == ["a/notes.md", "b/other.md"]
    assert [(s.path, s.reason) for s in found.skipped] == [("b/copy.md", "duplicate of a/notes.md")]
