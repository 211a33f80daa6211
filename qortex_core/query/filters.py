"""Metadata filters of a search: ``filters={"user": "ann", "score": {"gte": 3}}``.

The syntax is close to mem0's ``filters=``. Each key of the dict names a metadata key (letters,
digits and ``_``, up to 64; first not a digit) of the records to keep; the conditions of all
keys must hold (AND):

- ``{"user": "ann"}``: equality (a string, a finite number or a boolean; ``{"eq": v}`` too);
- ``{"topic": ["a", "b"]}`` or ``{"topic": {"in": ["a", "b"]}}``: one of the values;
- ``{"score": {"gte": 3, "lt": 10}}``: a range (``gt``, ``gte``, ``lt``, ``lte``) on numbers or
  on ISO 8601 times (``{"seen": {"gte": "2026-03-01"}}``; a bare date as ``lte`` or ``gt``
  bound means its whole day, times with a zone are compared in UTC).

Types are strict: ``"3"`` does not equal ``3``, a range on numbers skips string values, a
range on times skips values that are not ISO times. A record without the key never matches,
and neither does a passage of a file (files carry no metadata). :class:`MetadataFilter` says
the same thing twice: as a LanceDB ``where`` predicate over the memories table's JSON column
(:meth:`~MetadataFilter.sql`, every literal quoted) and as a test of one metadata dict
(:meth:`~MetadataFilter.matches`, for a table written before that column existed).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from qortex_core.errors import QueryError
from qortex_core.storage import times
from qortex_core.storage.sql import sql_quote

RANGES = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
OPERATORS = ("eq", "in", *RANGES)
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
MAX_CONDITIONS = 32
MAX_VALUES = 256  # of one ``in``
MAX_STRING = 1024
EXACT_INT = 2**53  # numbers compare as doubles: integers beyond this would round

Scalar = str | int | float | bool


@dataclass(frozen=True)
class Condition:
    """One test on one key: ``op`` in :data:`OPERATORS`; ``values`` holds one value, or the
    values of ``in``; a range on times holds its bound as ISO 8601 UTC."""

    key: str
    op: str
    values: tuple[Scalar, ...]
    on_time: bool = False


@dataclass(frozen=True)
class MetadataFilter:
    """Conditions that must all hold (see the module's syntax)."""

    conditions: tuple[Condition, ...]

    def sql(self, column: str) -> str:
        """A LanceDB ``where`` predicate over the JSON (JSONB) ``column``."""
        return " AND ".join(_sql(c, column) for c in self.conditions)

    def matches(self, metadata: dict) -> bool:
        """True when ``metadata`` passes every condition."""
        return all(_holds(c, metadata) for c in self.conditions)


@dataclass(frozen=True)
class Only:
    """What a search keeps besides its ranking: domains, an event-time window (validated ISO
    bounds) and metadata filters."""

    domains: Sequence[str] | None = None
    window: tuple[str | None, str | None] = (None, None)
    filters: MetadataFilter | None = None


def parse_filters(filters: object) -> MetadataFilter | None:
    """``filters`` checked and parsed (None or ``{}``: no filter).

    Raises:
        QueryError: not a dict, a bad key name, an unknown operator, a value that is not a
            string, finite number or boolean, an empty ``in``, a range bound that is neither a
            number nor an ISO time, or more than :data:`MAX_CONDITIONS` conditions.
    """
    if filters is None or isinstance(filters, MetadataFilter):
        return filters
    if not isinstance(filters, dict):
        raise QueryError(f"filters must be a dict of metadata key -> value, got {_kind(filters)}")
    conditions: list[Condition] = []
    for key, spec in filters.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise QueryError(
                f"bad filter key {str(key)[:40]!r}: use letters, digits and _ (up to 64, "
                "not starting with a digit)"
            )
        conditions += _conditions(key, spec)
    if len(conditions) > MAX_CONDITIONS:
        raise QueryError(f"filters hold {len(conditions)} conditions: limit {MAX_CONDITIONS}")
    return MetadataFilter(tuple(conditions)) if conditions else None


def _conditions(key: str, spec: object) -> list[Condition]:
    """The conditions of one key's filter value."""
    if isinstance(spec, (list, tuple)):
        return [_in(key, spec)]
    if not isinstance(spec, dict):
        return [Condition(key, "eq", (_scalar(key, spec),))]
    if not spec:
        raise QueryError(f"filter on {key!r} is an empty dict: give an operator and a value")
    out = []
    for op, value in spec.items():
        if op not in OPERATORS:
            raise QueryError(
                f"unknown filter operator {str(op)[:20]!r} on {key!r}: use {', '.join(OPERATORS)}"
            )
        if op == "in":
            out.append(_in(key, value))
        elif op == "eq":
            out.append(Condition(key, "eq", (_scalar(key, value),)))
        else:
            out.append(_range(key, op, value))
    return out


def _in(key: str, values: object) -> Condition:
    if not isinstance(values, (list, tuple)) or not values:
        raise QueryError(f"filter 'in' on {key!r} needs a non-empty list of values")
    if len(values) > MAX_VALUES:
        raise QueryError(f"filter 'in' on {key!r} has {len(values)} values: limit {MAX_VALUES}")
    return Condition(key, "in", tuple(_scalar(key, v) for v in values))


def _range(key: str, op: str, bound: object) -> Condition:
    """A range condition on a number, or on a time when ``bound`` is a string."""
    if isinstance(bound, str):
        try:
            when = times.parse_bound(bound, upper=op in ("lte", "gt"))
        except ValueError as exc:
            raise QueryError(f"filter {op!r} on {key!r}: {exc} (give a number or an ISO time)")
        return Condition(key, op, (when,), on_time=True)
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        raise QueryError(f"filter {op!r} on {key!r} takes a number or an ISO time: {_kind(bound)}")
    return Condition(key, op, (_number(key, bound),))


def _scalar(key: str, value: object) -> Scalar:
    """A value to compare with: a string, a finite number or a boolean."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _number(key, value)
    if isinstance(value, str):
        if len(value) > MAX_STRING or "\0" in value:
            raise QueryError(f"filter value of {key!r} is over {MAX_STRING} chars or holds NUL")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise QueryError(f"filter value of {key!r} is not valid UTF-8") from None
        return value
    raise QueryError(
        f"filter value of {key!r} must be a string, a number or a boolean, got {_kind(value)}"
    )


def _number(key: str, value: int | float) -> int | float:
    if isinstance(value, float) and not math.isfinite(value):
        raise QueryError(f"filter value of {key!r} is NaN or infinite: JSON has no such number")
    if isinstance(value, int) and abs(value) > EXACT_INT:
        raise QueryError(f"filter value of {key!r} is beyond +-2**53: it would compare rounded")
    return value


def _kind(value: object) -> str:
    return type(value).__name__


# -- the predicate, as LanceDB (DataFusion, Lance's JSON functions) evaluates it ------------
def _sql(condition: Condition, column: str) -> str:
    key = condition.key
    raw = f"json_extract({column}, {sql_quote('$.' + key)})"  # the value as JSON text
    if condition.op in RANGES:
        bound = condition.values[0]
        if condition.on_time:
            left = f"TRY_CAST(json_get_string({column}, {sql_quote(key)}) AS TIMESTAMP)"
            right = f"TRY_CAST({sql_quote(str(bound))} AS TIMESTAMP)"
            return f"({raw} LIKE '\"%' AND {left} {RANGES[condition.op]} {right})"
        return f"TRY_CAST({raw} AS DOUBLE) {RANGES[condition.op]} {float(bound)!r}"
    tests = [_equal_sql(value, key, column, raw) for value in condition.values]
    return "(" + " OR ".join(tests) + ")"


def _equal_sql(value: Scalar, key: str, column: str, raw: str) -> str:
    if isinstance(value, bool):
        return f"{raw} = {sql_quote('true' if value else 'false')}"
    if isinstance(value, (int, float)):
        return f"TRY_CAST({raw} AS DOUBLE) = {float(value)!r}"
    return (
        f"({raw} LIKE '\"%' AND json_get_string({column}, {sql_quote(key)}) = {sql_quote(value)})"
    )


# -- the same test on one dict ---------------------------------------------------------------
def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _equal(found: object, wanted: Scalar) -> bool:
    if isinstance(wanted, bool):
        return found is wanted
    if _is_number(wanted):
        return _is_number(found) and float(found) == float(wanted)  # type: ignore[arg-type]
    return isinstance(found, str) and found == wanted


def _holds(condition: Condition, metadata: dict) -> bool:
    if condition.key not in metadata:
        return False
    found = metadata[condition.key]
    if condition.op not in RANGES:
        return any(_equal(found, v) for v in condition.values)
    bound = condition.values[0]
    if condition.on_time:
        if not isinstance(found, str):
            return False
        try:
            left, right = times.to_epoch(times.parse_time(found)), times.to_epoch(str(bound))
        except ValueError:
            return False
    elif _is_number(found):
        left, right = float(found), float(bound)
    else:
        return False
    return {"gt": left > right, "gte": left >= right, "lt": left < right, "lte": left <= right}[
        condition.op
    ]
