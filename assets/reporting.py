"""How assets report: throttled progress into the Dagster log, and markdown previews for
metadata."""

from __future__ import annotations

import time
from typing import Callable, Sequence

from dagster import AssetExecutionContext, MetadataValue


def progress_logger(
    context: AssetExecutionContext, every_s: float = 1.0
) -> Callable[[str, int, int], None]:
    """A ``progress(stage, done, total)`` callback that logs each 10% of a stage, and between
    them at most once every ``every_s`` seconds (what a progress bar's rate and ETA read)."""
    last: dict[str, tuple[int, float]] = {}

    def report(stage: str, done: int, total: int) -> None:
        tenth, now = (10 * done // total if total else 10), time.monotonic()
        seen = last.get(stage)
        if seen is not None and seen[0] == tenth and done != total and now - seen[1] < every_s:
            return
        last[stage] = (tenth, now)
        context.log.info(f"{stage}: {done}/{total}")

    return report


def _cell(value: object, width: int = 80) -> str:
    text = " ".join(str(value).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def markdown_table(
    columns: Sequence[str], rows: Sequence[Sequence[object]], limit: int = 10
) -> MetadataValue:
    """A markdown table of the first ``limit`` rows (with a count of the rest)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"\n… and {len(rows) - limit} more")
    if not rows:
        lines.append("| " + " | ".join("" for _ in columns) + " |")
    return MetadataValue.md("\n".join(lines))
