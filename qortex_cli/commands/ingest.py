"""``qortex ingest SOURCE`` (a folder or one file): the Dagster ``ingest`` job, run in this
process against the local instance."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

from qortex_cli.output import json_text


def plural(n: int, word: str) -> str:
    """``1 document``, ``300 passages``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def _check_usable(source: Path) -> None:
    """Fail in one line unless ``source`` holds a usable document, before anything is written.

    The folder is walked (in sorted order) only up to its first usable file, and only that one
    is read: the run's ``documents`` asset lists and loads them all, once. With none usable,
    the line names the first file skipped and why.

    Raises:
        DatasetError: ``source`` is missing or holds no usable document.
    """
    from qortex_core.errors import DatasetError
    from qortex_core.ingest.documents import (
        CORPUS_SUFFIXES,
        TEXT_SUFFIXES,
        SourceConfig,
        not_found,
        read_document,
        safe_name,
    )
    from qortex_core.ingest.source_listing import Listed, Skipped, list_one, walk
    from qortex_core.redact import redact

    suffixes = TEXT_SUFFIXES + CORPUS_SUFFIXES
    if source.is_file():
        one = list_one(source, suffixes)
        items: Iterable[Listed | Skipped] = (*one.files, *one.skipped)
        config = SourceConfig(root=source.parent)
    elif source.is_dir():
        items, config = walk(source, suffixes), SourceConfig(root=source)
    else:
        raise DatasetError(not_found(source))
    skipped: list[Skipped] = []
    for item in items:
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        listed = (item.stat.st_dev, item.stat.st_ino) if item.stat is not None else None
        try:
            read_document(Path(item.path), config, listed)
            return
        except ValueError as exc:
            skipped.append(Skipped(item.rel, str(exc)))
    named = sorted(
        (Skipped(safe_name(s.path, config), redact(s.reason, config.redaction)) for s in skipped),
        key=lambda s: s.path,
    )
    why = f" ({named[0].path}: {named[0].reason})" if named else ""
    raise DatasetError(
        f"no usable .md, .txt, .json or .jsonl document in {source}{why}; nothing was changed"
    )


def cmd_ingest(args: argparse.Namespace) -> int:
    """Run the ingest job over ``args.source`` (a folder or one file); print a summary (JSON
    with ``--json``)."""
    source = Path(args.source).expanduser()
    _check_usable(source)  # an empty source would publish nothing
    from qortex_core.storage.tenants import tenant_home

    # ~ expanded, a URI kept as it is; a tenant's memory lives in <home>/tenants/NAME
    home = tenant_home(args.home, args.tenant)
    from qortex_cli.runs.local import run_ingest  # imports dagster

    outcome = run_ingest(source, home, progress=not args.quiet)
    s = outcome.summary
    if args.json:
        print(json_text(outcome.report()))
        return 0
    failed_checks = [name for name, ok in outcome.checks.items() if not ok]
    status = " (unchanged)" if s["snapshot_status"] == "unchanged" else ""
    print(
        f"ingested {plural(s['documents'], 'document')}, {plural(s['passages'], 'passage')} "
        f"({s['new_documents']} new, {s['changed_documents']} changed, "
        f"{s['deleted_documents']} deleted); extracted {s['extracted']}, failed {s['failed']}, "
        f"embedded {s['embedded']} texts -> snapshot {s['snapshot']}{status}; "
        f"extractor {s['extractor']} (model {s['model']}), embedder {s['embedder']}"
    )
    if failed_checks:
        print(f"warning: checks not passed: {', '.join(failed_checks)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ingest",
        help="run the Dagster ingest job over a source folder (or one file) and publish a snapshot",
    )
    p.add_argument(
        "source",
        help="a folder of .md, .txt and corpus .json/.jsonl files, or one such file (the snapshot "
        "then holds that source's documents, beside the written memories)",
    )
    p.add_argument("--home", help="data home (default $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--tenant", help="tenant namespace: ingest into <home>/tenants/NAME")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_ingest)
