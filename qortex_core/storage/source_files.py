"""Reading one source file safely: never block, never read without a bound, never trust a name.

A file listed as regular may be swapped for a FIFO, a device or a socket before it is read
(a race the listing cannot close). :func:`read_bounded` opens without blocking, checks the
type of what it actually opened, and reads at most ``max_bytes + 1`` bytes. :func:`load_json`
and :func:`check_text` turn the ways a JSON corpus can lie (nesting past the parser's
recursion limit, lone surrogate escapes that no UTF-8 store accepts) into a reason to skip it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)
_BLOCK = 1 << 20


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _special(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (None: regular, or gone)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind(mode)


@dataclass(frozen=True)
class SourceBytes:
    """What was read from one source file: its bytes and its modification time (epoch s)."""

    data: bytes
    mtime: float


def read_bounded(path: Path, max_bytes: int) -> SourceBytes:
    """The bytes and modification time of the regular file at ``path``, opened without blocking.

    Raises:
        ValueError: not a regular file once opened (FIFO, device, socket), larger than
            ``max_bytes``, or unreadable; the message is the reason to record.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # a socket cannot be opened at all (ENXIO)
        kind = _special(path)
        raise ValueError(
            f"{kind}, not a regular file" if kind else f"unreadable: {exc.strerror or exc}"
        ) from None
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if not stat.S_ISREG(mode):  # re-checked on what was opened: the listing may be stale
            raise ValueError(f"{_kind(mode)}, not a regular file")
        chunks: list[bytes] = []
        total = 0
        while block := os.read(fd, min(_BLOCK, max_bytes + 1 - total)):
            chunks.append(block)
            total += len(block)
            if total > max_bytes:
                raise ValueError(f"larger than {max_bytes} bytes")
        return SourceBytes(b"".join(chunks), info.st_mtime)
    except OSError as exc:
        raise ValueError(f"unreadable: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def load_json(text: str) -> object:
    """``json.loads`` whose failures are reasons to skip a file.

    Raises:
        ValueError: not valid JSON, or nested deeper than the parser can follow.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to parse") from None


def check_text(value: str, where: str) -> str:
    """``value`` when it encodes as UTF-8.

    Raises:
        ValueError: it holds a lone surrogate (a ``\\ud800``-``\\udfff`` escape without its pair).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{where} holds a lone surrogate escape (\\u{ord(value[exc.start]):04x}) at "
            f"character {exc.start}: not valid Unicode text"
        ) from None
    return value
