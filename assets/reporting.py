"""How assets report: throttled progress into the Dagster log, and markdown previews for
metadata."""

from __future__ import annotations

from typing import Callable, Sequence

from dagster import AssetExecutionContext, MetadataValue


def progress_logger(context: AssetExecutionContext) -> Callable[[str, int, int], None]:
    """A ``progress(stage, done, total)`` callback that logs at most every 10% of a stage."""
    last: dict[str, int] = {}

    def report(stage: str, done: int, total: int) -> None:
        tenth = 10 * done // total if total else 10
        if last.get(stage) == tenth and done != total:
            return
        last[stage] = tenth
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
