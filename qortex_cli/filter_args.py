"""``qortex query --filter``: metadata filters on the command line (repeatable, all must hold).

``KEY=VALUE`` (equality), ``KEY=A|B`` (one of), ``KEY>=V``, ``KEY>V``, ``KEY<=V``, ``KEY<V``
(ranges on numbers or ISO times), or a JSON object in the library's syntax
(:mod:`qortex_core.query.filters`). A value is a number when it reads as one, ``true``/``false``
a boolean, ``"3"`` (JSON-quoted) the string 3, anything else a string.
"""

from __future__ import annotations

import argparse
import json
import re

from qortex_core.errors import QueryError
from qortex_core.query.filters import RANGES, parse_filters

_CONDITION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|>|<|=)(.*)", re.DOTALL)
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]{1,3})?")
_OPERATOR = {"=": "eq", **{sign: name for name, sign in RANGES.items()}}
USAGE = "use KEY=VALUE, KEY=A|B, KEY>=V, KEY<V (also > and <=) or a JSON object"


def _value(text: str) -> object:
    """A command-line value as the filter compares it (see the module)."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if _NUMBER.fullmatch(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    return text


def filter_arg(text: str) -> dict:
    """One ``--filter`` as ``{key: {operator: value}}``, checked (argparse type).

    Raises:
        argparse.ArgumentTypeError: not a condition of :data:`USAGE`, or a bad filter.
    """
    try:
        if text.lstrip().startswith("{"):
            given = json.loads(text)
            parse_filters(given)  # checked as the library checks it
            return {k: _normalised(v) for k, v in given.items()}
        found = _CONDITION.fullmatch(text)
        if not found:
            raise QueryError(f"bad filter {text[:60]!r}: {USAGE}")
        key, sign, raw = found.groups()
        op = _OPERATOR[sign]
        values = [_value(v) for v in raw.split("|")] if op == "eq" else [_value(raw)]
        spec = {key: {"in": values} if len(values) > 1 else {op: values[0]}}
        parse_filters(spec)
        return spec
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--filter is not valid JSON: {exc.msg}") from None
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


filter_arg.__name__ = "filter"


def _normalised(spec: object) -> dict:
    """A key's filter value as an operator dict (a list: ``in``; a scalar: ``eq``)."""
    if isinstance(spec, dict):
        return spec
    return {"in": spec} if isinstance(spec, list) else {"eq": spec}


def combined(specs: list[dict] | None) -> dict | None:
    """Every ``--filter`` merged into one filters dict (None when none was given).

    Raises:
        QueryError: two ``--filter`` give the same operator on one key.
    """
    out: dict[str, dict] = {}
    for spec in specs or ():
        for key, ops in spec.items():
            mine = out.setdefault(key, {})
            for op, value in ops.items():
                if op in mine:
                    raise QueryError(f"--filter gives {op!r} on {key!r} twice")
                mine[op] = value
    return out or None
