"""SQL text for LanceDB filters (DataFusion): string literals and ``IN`` lists."""

from __future__ import annotations

from typing import Iterable


def sql_quote(text: str) -> str:
    """A SQL string literal: the text in single quotes, each quote doubled."""
    return "'" + text.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b', ...)`` over ``values`` as string literals."""
    return f"{column} IN ({', '.join(sql_quote(v) for v in values)})"
