"""JSON for public results and records: ``x.to_dict()``, ``T.from_dict(d)``, ``T.json_schema()``.

One mixin, :class:`JsonRecord`, on frozen dataclasses. ``to_dict`` gives plain dicts, lists,
strings, booleans, None and finite numbers: tuples become lists, datetimes ISO 8601 strings, numpy
scalars Python numbers, and a NaN or infinite float ``None``, so ``json.dumps(d,
allow_nan=False)`` always works. ``from_dict`` reads the field types back from the annotations
(nested records, ``tuple[str, ...]``, ``X | None``, datetimes), so ``T.from_dict(x.to_dict())
== x``. ``json_schema`` is the JSON Schema of what ``to_dict`` returns (MCP tools publish it as
their ``outputSchema``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import types
import typing
from typing import Any, Mapping, TypeVar, cast

from qortex_core.errors import FormatError

R = TypeVar("R", bound="JsonRecord")


class JsonRecord:
    """Mixin for frozen dataclasses: ``to_dict``, ``from_dict`` and ``json_schema``.

    A subclass may list computed properties in ``json_extras``: ``to_dict`` adds them,
    ``from_dict`` skips them and ``json_schema`` declares them (typed by the property's return
    annotation).
    """

    json_extras: typing.ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-safe plain data (see the module docstring)."""
        data = {f.name: to_json(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        data.update({name: to_json(getattr(self, name)) for name in self.json_extras})
        return data

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record ``data`` describes (as :meth:`to_dict` wrote it; unknown keys are ignored).

        Raises:
            FormatError: ``data`` is not a mapping, lacks a required field or holds a value of
                the wrong type.
        """
        return _record(cls, data, cls.__name__)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of :meth:`to_dict`'s result."""
        return _schema(cls)


def to_json(value: Any) -> Any:
    """``value`` as JSON-safe plain data (records, containers, datetimes, numpy scalars)."""
    if isinstance(value, JsonRecord):
        return value.to_dict()
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json(v) for v in value]
    if hasattr(value, "item"):  # a numpy scalar
        return to_json(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return str(value)


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _record(cls: type[R], data: Any, where: str) -> R:
    if not isinstance(data, Mapping):
        raise FormatError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cast(Any, cls))
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init:
            continue
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FormatError(f"{where}: missing field {f.name!r}")
            continue
        values[f.name] = _value(hints[f.name], data[f.name], f"{where}.{f.name}")
    return cls(**values)


def _value(hint: Any, value: Any, where: str) -> Any:
    """``value`` (plain JSON data) as the type ``hint`` names."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _value(inner[0] if len(inner) == 1 else Any, value, where)
    if hint is Any:
        return value
    if isinstance(hint, type) and issubclass(hint, JsonRecord):
        return _record(hint, value, where)
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise FormatError(f"{where}: expected a list, got {type(value).__name__}")
        item = args[0] if args else Any
        items = [_value(item, v, f"{where}[{n}]") for n, v in enumerate(value)]
        return tuple(items) if (origin or hint) is tuple else items
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise FormatError(f"{where}: expected an object, got {type(value).__name__}")
        item = args[1] if len(args) == 2 else Any
        return {k: _value(item, v, f"{where}.{k}") for k, v in value.items()}
    return _scalar(hint, value, where)


def _scalar(hint: Any, value: Any, where: str) -> Any:
    if hint is dt.datetime:
        try:
            return dt.datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise FormatError(f"{where}: expected an ISO 8601 time, got {value!r:.40}") from None
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint in (str, int, bool) and type(value) is not hint:
        raise FormatError(f"{where}: expected {hint.__name__}, got {type(value).__name__}")
    return value


def _schema(cls: type) -> dict[str, Any]:
    """The serialisation schema pydantic derives from the dataclass, plus ``json_extras``."""
    from pydantic import TypeAdapter

    schema = TypeAdapter(cls).json_schema(mode="serialization")
    extras = getattr(cls, "json_extras", ())
    if extras:
        props = schema.setdefault("properties", {})
        for name in extras:
            returns = typing.get_type_hints(getattr(cls, name).fget).get("return", Any)
            props[name] = TypeAdapter(returns).json_schema(mode="serialization")
        schema["required"] = sorted(set(schema.get("required", [])) | set(extras))
    return schema
