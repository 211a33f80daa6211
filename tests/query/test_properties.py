"""Property-based tests: the query API and the document loader never fail with anything but their typed errors."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qortex_core.errors import QueryError
from qortex_core.ingest.documents import SourceConfig, load_documents
from qortex_core.query.retriever import QueryResult, Retriever

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

odd_pieces = st.sampled_from(
    ["\udcff", "\x00", "\u202e", "🙂", "\r\n", "Ostrania", "Orlan Vesk", "    ", "\ufeff"]
)
query_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.text(max_size=20), odd_pieces), max_size=12).map("".join),
    st.integers(0, 3000).map(lambda n: "capital country " * n),
    st.none(),
    st.binary(max_size=20),
)


@pytest.fixture(scope="module")
def retriever(_toy_home_session, embedder) -> Retriever:
    return Retriever.open(_toy_home_session[0], embedder=embedder)


@SETTINGS
@given(
    text=query_text,
    top_k=st.one_of(st.integers(-5, 150), st.sampled_from([0, 1, 100, 101, 10**9])),
    mode=st.sampled_from(["auto", "hipporag", "hybrid", "dense", "bogus", ""]),
    domains=st.one_of(st.none(), st.just(["default"]), st.lists(st.text(max_size=8), max_size=2)),
)
def test_query_returns_a_ranked_result_or_a_query_error(retriever, text, top_k, mode, domains):
    try:
        result = retriever.query(text, top_k=top_k, mode=mode, domains=domains)
    except QueryError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert isinstance(result, QueryResult)
    assert len(result.passages) <= top_k
    scores = [h.score for h in result.passages]
    assert scores == sorted(scores, reverse=True)
    assert all(isinstance(s, float) and s == s for s in scores)  # no NaN
    assert not domains or all(h.domain in domains for h in result.passages)


name_part = st.one_of(
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=10
    ),
    st.binary(min_size=1, max_size=8)
    .filter(lambda b: b"/" not in b and b"\x00" not in b)
    .map(os.fsdecode),
).filter(lambda s: s not in (".", ".."))
suffix = st.sampled_from([".md", ".txt", ".json", ".jsonl", ".bin", "", ".MD"])
corpus_rows = st.lists(
    st.fixed_dictionaries({"title": st.text(max_size=10), "text": st.text(max_size=40)}), max_size=3
)
content = st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    corpus_rows.map(lambda rows: json.dumps(rows).encode()),
    st.recursive(
        st.none() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
        max_leaves=6,
    ).map(lambda v: json.dumps(v).encode()),
)
files = st.lists(st.tuples(st.booleans(), name_part, suffix, content), max_size=6)


def write_files(root: Path, entries) -> list[Path]:
    written = []
    for nested, name, ext, data in entries:
        folder = root / "sub" if nested else root
        folder.mkdir(exist_ok=True)
        path = folder / (name + ext)
        try:
            path.write_bytes(data)
        except (
            OSError
        ):  # a name the file system refuses (too long, ...) is not the loader's concern
            continue
        written.append(path)
    return written


@SETTINGS
@given(entries=files)
def test_loader_loads_or_skips_with_a_reason(entries):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written = write_files(root, entries)
        found = load_documents(SourceConfig(root=root, max_bytes=150))
        loaded = {d.doc_id for d in found.documents}
        skipped = {s.path: s.reason for s in found.skipped}
        assert all(reason.strip() for reason in skipped.values())
        for path in written:
            rel = path.relative_to(root)
            if path.name.startswith("."):
                continue  # hidden files are ignored by design
            shown = os.fsencode(str(rel)).decode(
                "utf-8", "replace"
            )  # skipped paths are reported as valid UTF-8
            assert rel.as_posix() in loaded or shown in skipped, rel
        for doc in found.documents:
            assert doc.sections and all(s.text.strip() for s in doc.sections)
            stored = json.dumps(
                [doc.doc_id, doc.domain, [[s.title, s.text] for s in doc.sections]],
                ensure_ascii=False,
            )
            stored.encode("utf-8")  # what is stored must be valid UTF-8 (LanceDB/Arrow strings)


def test_a_file_name_that_is_not_utf8_is_skipped_with_its_reason(tmp_path):
    (tmp_path / os.fsdecode(b"notes-\xff\xfe.md")).write_text("Orlan Vesk is a composer.")
    (tmp_path / "fine.md").write_text("Ivo Lark is a painter.")
    found = load_documents(SourceConfig(root=tmp_path))
    assert [d.doc_id for d in found.documents] == ["fine.md"]
    assert [(s.path, s.reason) for s in found.skipped] == [
        ("notes-\ufffd\ufffd.md", "file name is not valid UTF-8")
    ]
