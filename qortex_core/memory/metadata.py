"""A memory's metadata and source: inputs like its text, so checked, bounded and redacted.

Metadata is a JSON object of at most :data:`MAX_DEPTH` levels and :data:`MAX_BYTES` bytes
(serialised) with finite numbers only (JSON has no NaN or Infinity); secrets in it are redacted
(:func:`qortex_core.redact.redact_json`), and so are credentials in a ``source`` (a URL's
password). :func:`read_metadata` reads a stored value back without ever failing: rows written
before these bounds may hold anything, and one of them must not break a listing of the home.
"""

from __future__ import annotations

import json
import math

from qortex_core.errors import RecordError
from qortex_core.redact import RedactionConfig, redact, redact_json

MAX_DEPTH = 32  # nested objects and lists
MAX_BYTES = 64 * 1024  # serialised as UTF-8 JSON
MAX_SOURCE_CHARS = 4096
WITHHELD = "_withheld"  # the key of what read_metadata shows for a stored value it refuses


def _scalar_size(node: object) -> int:
    """Characters ``node`` (a JSON scalar) takes at least; RecordError for a non-JSON value."""
    if isinstance(node, str):
        return len(node) + 2
    if isinstance(node, float) and not math.isfinite(node):
        raise RecordError("metadata holds NaN or Infinity, which JSON cannot carry: use null")
    if node is None or isinstance(node, (bool, int, float)):
        return 1
    raise RecordError(f"metadata must be JSON: a {type(node).__name__} is not a JSON value")


def check_tree(value: object) -> None:
    """Check a JSON value without recursion: nesting, value types, finite numbers, rough size.

    Raises:
        RecordError: nested deeper than :data:`MAX_DEPTH`, a non-string key, a value JSON does
            not have (NaN, Infinity, a set, an object), or clearly over :data:`MAX_BYTES`.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    size = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list, tuple)):
            if depth > MAX_DEPTH:
                raise RecordError(f"metadata is nested deeper than {MAX_DEPTH} levels")
            items = list(node.items()) if isinstance(node, dict) else [(None, v) for v in node]
            for key, child in items:
                if isinstance(node, dict) and not isinstance(key, str):
                    raise RecordError(f"metadata keys must be strings, got {type(key).__name__}")
                size += 1 + (len(key) + 3 if key is not None else 0)
                stack.append((child, depth + 1))
        else:
            size += _scalar_size(node)
        if size > MAX_BYTES:
            raise RecordError(f"metadata is over {MAX_BYTES} bytes as JSON")


def _dumps(value: object) -> str:
    """``value`` as JSON text, or RecordError."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise RecordError("metadata is not valid UTF-8 (it holds a lone surrogate)") from None
    except (TypeError, ValueError) as exc:  # an int too long to print, say
        raise RecordError(f"metadata is not JSON-serialisable: {exc}") from None
    if size > MAX_BYTES:
        raise RecordError(f"metadata is {size} bytes as JSON: the limit is {MAX_BYTES}")
    return text


def clean_metadata(value: object, redaction: RedactionConfig = RedactionConfig()) -> dict:
    """The metadata to store: a checked copy of ``value`` (None: ``{}``) with secrets redacted.

    Raises:
        RecordError: not a dict, nested deeper than 32 levels, over 64 KB as JSON, or holding
            NaN, Infinity or a value JSON does not have.
    """
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(f"metadata must be a JSON object (a dict), got {type(value).__name__}")
    check_tree(value)
    copy = json.loads(_dumps(value))
    return redact_json(copy, redaction)


def clean_source(value: object, redaction: RedactionConfig = RedactionConfig()) -> str | None:
    """The source to store (None stays None), with credentials redacted as in text
    (``https://admin:pw@host`` keeps the user, not the password).

    Raises:
        RecordError: not a string, over 4096 characters, or not valid UTF-8.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(f"source must be a string, got {type(value).__name__}")
    if len(value) > MAX_SOURCE_CHARS:
        raise RecordError(f"source is {len(value)} characters: the limit is {MAX_SOURCE_CHARS}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError("source is not valid UTF-8 (it holds a lone surrogate)") from None
    return redact(value, redaction)


def _reject_constant(name: str) -> float:
    raise ValueError(f"holds {name}")


def read_metadata(text: str | None) -> dict:
    """Stored metadata as a dict; a value the bounds refuse (from before them) is shown as
    ``{"_withheld": reason}`` instead of being parsed, so reading never fails."""
    if not text:
        return {}
    if len(text) > MAX_BYTES:
        return {WITHHELD: f"stored metadata is over {MAX_BYTES} bytes"}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        if not isinstance(value, dict):
            raise ValueError("is not an object")
        check_tree(value)
    except (ValueError, RecordError) as exc:  # JSONDecodeError is a ValueError
        return {WITHHELD: f"stored metadata is unreadable: {exc}"}
    except RecursionError:
        return {WITHHELD: "stored metadata is nested too deeply to read"}
    return value
