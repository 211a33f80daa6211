"""Typed exceptions a user can cause: the CLI prints one line, exit 2 (StorageError: 1)."""

from __future__ import annotations

import errno


class QortexError(Exception):
    """Base class of every error qortex raises on purpose."""


class DatasetError(QortexError):
    """A questions, corpus or OpenIE file is missing, unreadable or malformed."""


class HomeError(QortexError):
    """The data home is missing, unreadable or not writable."""


class SnapshotError(QortexError):
    """No usable snapshot: none published, or a checksum or array is bad."""


class QueryError(QortexError):
    """A query is empty or its parameters are out of range."""


class ConfigError(QortexError):
    """A configuration value is invalid."""


class RecognitionError(QortexError):
    """The LLM recognition filter failed after its retries (the message never holds the API key)."""


class FormatError(QortexError):
    """Serialised data (a result or record's ``to_dict()`` form) does not have its type's shape."""


class StorageError(QortexError):
    """The machine refused a read or write: no space left, a read-only filesystem, an I/O error.

    An environment failure, not bad input: the CLI exits 1 (bad input exits 2). Nothing stored
    is lost: every write is atomic, so the last good state stays.
    """


# errno -> (the problem, the fix) for failures of the environment rather than of the input
_ENVIRONMENT = {
    errno.ENOSPC: ("no space left on the device", "free some space and retry"),
    errno.EDQUOT: ("the disk quota is exceeded", "free some space and retry"),
    errno.EROFS: ("the filesystem is read-only", "use a writable data home"),
    errno.EIO: ("an I/O error occurred", "check the disk"),
}
# the same failures as Rust (LanceDB) and SQLite (Dagster's instance) word them
_SIGNATURES = (
    (("os error 28", "no space left", "database or disk is full"), errno.ENOSPC),
    (("os error 122", "quota exceeded"), errno.EDQUOT),
    (("os error 30", "read-only file system", "readonly database"), errno.EROFS),
    (("os error 5)", "disk i/o error", "input/output error"), errno.EIO),
)


def environment_errno(exc: BaseException | str) -> int | None:
    """The errno of an environment failure in ``exc`` (its causes too) or in a message, else None.

    Only no space, quota, read-only filesystem and I/O errors count: a missing file or a
    permission problem is a problem with the path the user chose.
    """
    seen: set[int] = set()
    current: BaseException | str | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ENVIRONMENT:
            return current.errno
        text = str(current).lower()
        for needles, number in _SIGNATURES:
            if any(n in text for n in needles):
                return number
        if isinstance(current, str):
            return None
        current = current.__cause__ or current.__context__
    return None


def storage_error(what: str, exc: BaseException | str) -> StorageError | None:
    """A one-line :class:`StorageError` for ``what`` (e.g. "cannot write table 'x' in HOME"),
    or None when ``exc`` is not an environment failure."""
    number = environment_errno(exc)
    if number is None:
        return None
    problem, fix = _ENVIRONMENT[number]
    return StorageError(f"{what}: {problem}; {fix}")


class RecordError(QortexError):
    """A memory write or lookup is invalid: empty or oversized text, a bad time, an unknown,
    forgotten or foreign record id."""


class RevisionConflict(RecordError):
    """``update`` or ``forget`` named an ``expected_revision`` that is no longer the record's
    newest: another writer revised it first (re-read it, then decide)."""


def did_you_mean(word: object, choices) -> str:
    """``": did you mean 'X'?"`` for the closest of ``choices`` to ``word`` ("" when none is
    close: a typo is suggested, a guess is not)."""
    import difflib

    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f": did you mean {close[0]!r}?" if close else ""
