"""``qortex ingest SOURCE_DIR``: until the Dagster job lands, calls the library stages directly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load_documents(source: Path) -> list:
    """Paragraph passages from the .md and .txt files under ``source``; the first folder is the domain."""
    from qortex_core.errors import DatasetError
    from qortex_core.model import Passage

    if not source.is_dir():
        raise DatasetError(f"source directory not found: {source}")
    out = []
    for path in sorted(source.rglob("*")):
        if path.suffix not in (".md", ".txt") or not path.is_file():
            continue
        rel = path.relative_to(source)
        domain = rel.parts[0] if len(rel.parts) > 1 else "default"
        text = path.read_text(encoding="utf-8", errors="replace")
        for para in (p.strip() for p in text.split("\n\n")):
            if para and not para.startswith("#"):
                out.append(Passage(text=" ".join(para.split()), title=path.stem.replace("_", " "), doc_id=str(rel), domain=domain))
    return out


def cmd_ingest(args: argparse.Namespace) -> int:
    from pipelines.cli import Progress
    from qortex_core import index
    from qortex_core.embed import make_embedder
    from qortex_core.extract import OfflineExtractor
    from qortex_core.store import LanceStore, default_home

    home = Path(args.home) if args.home else default_home()
    store = LanceStore.open(home)
    passages = load_documents(Path(args.source))
    extractor, embedder = OfflineExtractor(), make_embedder()
    chunks = index.sync_chunks(store, passages)
    ex = index.extract_chunks(store, extractor, progress=Progress())
    em = index.embed_index(store, embedder, extractor.cache_key, progress=Progress())
    index.build_synonyms(store)
    path = index.build_snapshot(store, home, embedder.name)
    summary = {"documents": len({p.doc_id for p in passages}), "chunks": chunks.total, "extracted": ex.extracted,
               "embedded": em.texts_embedded, "failed": ex.failed, "snapshot": path.name}
    print(json.dumps(summary) if args.json else f"ingested {summary['chunks']} chunks -> snapshot {path.name}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ingest", help="ingest a source directory and publish a snapshot")
    p.add_argument("source")
    p.add_argument("--home")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_ingest)
