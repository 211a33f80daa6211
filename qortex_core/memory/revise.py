"""Checks and constructors for revising a record: the rules every write path shares.

A record's revisions are numbered 1, 2, ... with no gap and no repeat (each is planned under
the records lock against the newest committed row); a forgotten record takes no further
revision; a record merged into another takes only a ``forget``.
"""

from __future__ import annotations

import json

from qortex_core.errors import RecordError, RevisionConflict
from qortex_core.memory.records import Revision, utc_now

MAX_DOMAIN_CHARS = 64


def checked_domain(value: object) -> str:
    """A record's domain: "default" for None, else 1-64 characters, stripped."""
    if value is None:
        return "default"
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_DOMAIN_CHARS:
        raise RecordError(f"domain must be 1-{MAX_DOMAIN_CHARS} characters, got {value!r}")
    return value.strip()


def refuse_passage_id(record_id: object, action: str) -> None:
    """Refuse to ``action`` (update) a file's passage: it changes only with its file.

    Raises:
        RecordError: ``record_id`` is a passage id (``p_...``).
    """
    if isinstance(record_id, str) and record_id.strip().startswith("p_"):
        raise RecordError(
            f"cannot {action} {record_id.strip()[:40]}: it is a passage of an ingested file, "
            "which changes only with its file (edit the file, then ingest); "
            f"{action} takes memory ids (m_...), forget, history and get take p_ ids too"
        )


def revisable(
    row: dict | None, record_id: str, action: str, expected: int | None, tenant: str
) -> dict:
    """``row``, the newest row of written record ``record_id``, if ``action`` may revise it.

    Raises:
        RecordError: unknown id, a passage id, a forgotten record, or one merged away (except
            to forget it).
        RevisionConflict: ``expected`` is given and is not the newest revision.
    """
    refuse_passage_id(record_id, action)  # only forget, history and get take p_ ids
    if row is None or not record_id.startswith("m_"):
        raise RecordError(f"unknown memory id {record_id!r} (tenant {tenant})")
    merged_away = row["op"] == "merged" and action != "forget"
    if row["op"] == "forget" or merged_away:
        gone = "merged into " + row["target"] if row["op"] == "merged" else "forgotten"
        raise RecordError(f"cannot {action} memory {record_id}: it was {gone}")
    if expected is not None and int(row["revision"]) != expected:
        raise RevisionConflict(
            f"cannot {action} memory {record_id}: expected revision {expected}, but it is at "
            f"revision {row['revision']} (written by {row['writer']}); re-read it and retry"
        )
    return row


def next_revision(row: dict, op: str, text: str, when: str | None, writer: str) -> Revision:
    """The revision after ``row`` (a record's newest row)."""
    return Revision(
        row["id"], int(row["revision"]) + 1, op, text, when, utc_now(), row["source"],
        row["domain"], writer,
    )  # fmt: skip


def expected_revision_of(value: object) -> int | None:
    """``expected_revision`` checked: None, or a revision number (an int from 1)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RecordError(f"expected_revision must be an integer from 1, got {value!r}")
    return value


def row_metadata(row: dict) -> dict:
    return json.loads(row["metadata"] or "{}")


def checked_id(record_id: object) -> str:
    if not isinstance(record_id, str) or not record_id.strip():
        raise RecordError(f"not a memory id: {record_id!r}")
    return record_id.strip()
