"""What ``--json`` prints: strict JSON, always.

Python's ``json.dumps`` writes ``NaN`` and ``Infinity`` by default, which no JSON parser is bound
to accept. Every command's JSON goes through :func:`json_text`, which never does: a non-finite
number becomes ``null``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path


def _finite(value: object) -> object:
    """``value`` with every NaN or infinite float replaced by None (containers copied)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(value: object, indent: int | None = None) -> str:
    """``value`` as JSON text that every parser reads (NaN and Infinity written as null)."""
    try:
        return json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:  # a non-finite number somewhere
        return json.dumps(_finite(value), indent=indent, allow_nan=False)


def emit_report(report: dict, path: str | None) -> None:
    """Print a JSON report and, when ``path`` is given, write the same text there."""
    text = json_text(report, indent=2)
    if path:
        Path(path).write_text(text + "\n")
    print(text)
