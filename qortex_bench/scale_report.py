"""The scale ladder's report: growth exponents between sizes and the markdown tables.

A growth exponent between sizes ``n_a < n_b`` is ``log(b / a) / log(n_b / n_a)`` of a figure
``a`` at ``n_a`` and ``b`` at ``n_b``: 1 is linear, 2 quadratic; n log n reads
``1 + log(log n_b / log n_a) / log(n_b / n_a)`` (1.08 over 100k -> 1M). Stages carry
seconds as measured and *calibrated* seconds (over the machine's speed factor, see
:mod:`qortex_bench.box_speed`); both exponents are reported.
"""

from __future__ import annotations

import math

MODES = ("hipporag", "hipporag_exact", "dense")  # hipporag_exact: every fact scored


def _exponent(a: float | None, b: float | None, n_a: int, n_b: int) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0 or n_a == n_b:
        return None
    return round(math.log(b / a) / math.log(n_b / n_a), 2)


def n_log_n_exponent(n_a: int, n_b: int) -> float:
    """What n log n reads as a growth exponent between ``n_a`` and ``n_b``."""
    return round(1 + math.log(math.log(n_b) / math.log(n_a)) / math.log(n_b / n_a), 3)


def growth(rows: list[dict]) -> list[dict]:
    """Growth exponents of each stage's seconds (as measured and calibrated) and peak RSS above
    its start, of the retriever's RSS and of each mode's p50, between consecutive sizes."""
    out = []
    for lo, hi in zip(rows, rows[1:]):
        n_a, n_b = lo["passages"], hi["passages"]
        entry: dict = {
            "from": n_a,
            "to": n_b,
            "n_log_n": n_log_n_exponent(n_a, n_b),
            "seconds": {},
            "calibrated_seconds": {},
            "rss_growth": {},
        }
        for stage in lo["stages"]:
            a, b = lo["stages"][stage], hi["stages"][stage]
            entry["seconds"][stage] = _exponent(a["seconds"], b["seconds"], n_a, n_b)
            entry["calibrated_seconds"][stage] = _exponent(
                a.get("box", {}).get("calibrated_seconds"),
                b.get("box", {}).get("calibrated_seconds"),
                n_a,
                n_b,
            )
            entry["rss_growth"][stage] = _exponent(
                a["peak_rss_mb"] - a["rss_before_mb"],
                b["peak_rss_mb"] - b["rss_before_mb"],
                n_a,
                n_b,
            )
        ra, rb = lo["retriever"], hi["retriever"]
        entry["retriever_rss"] = _exponent(
            ra["rss_after_open_mb"] - ra["rss_before_open_mb"],
            rb["rss_after_open_mb"] - rb["rss_before_open_mb"],
            n_a,
            n_b,
        )
        for mode in MODES:
            entry[f"{mode}_p50"] = _exponent(ra[mode]["p50_ms"], rb[mode]["p50_ms"], n_a, n_b)
        out.append(entry)
    return out


def _sizes_table(report: dict, stages: tuple[str, ...]) -> list[str]:
    head = [
        "passages",
        *stages,
        "snapshot MB",
        "retriever RSS MB",
        "hipporag p50/p95 ms",
        "hipporag, every fact scored, p50/p95 ms",
        "dense p50/p95 ms",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["sizes"]:
        r = row["retriever"]
        cells = [str(row["passages"])]
        cells += [
            f"{row['stages'][s]['seconds']} s / {row['stages'][s]['peak_rss_mb']:.0f}"
            for s in stages
        ]
        cells += [
            str(row["snapshot_mb"]),
            f"{r['rss_after_open_mb'] - r['rss_before_open_mb']:.0f}",
        ]
        cells += [f"{r[m]['p50_ms']} / {r[m]['p95_ms']}" for m in MODES]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _growth_table(report: dict, stages: tuple[str, ...]) -> list[str]:
    """Exponents of stage seconds between sizes: measured, then calibrated in brackets."""
    if not report.get("growth"):
        return []
    lines = [
        "",
        "Growth exponents of stage seconds (calibrated for the machine's speed in brackets):",
        "",
        "| sizes | n log n | " + " | ".join(stages) + " |",
        "|" + "---|" * (len(stages) + 2),
    ]
    for g in report["growth"]:
        cells = [f"{g['from']} -> {g['to']}", str(g.get("n_log_n", ""))]
        for s in stages:
            raw, cal = g["seconds"].get(s), g.get("calibrated_seconds", {}).get(s)
            cells.append(f"{raw} ({cal})" if cal is not None else str(raw))
        lines.append("| " + " | ".join(cells) + " |")
    factors = [
        f"{row['passages']}: "
        + ", ".join(f"{row['stages'][s]['box']['factor']:.2f}" for s in stages)
        for row in report["sizes"]
        if all("box" in row["stages"][s] for s in stages)
    ]
    if factors:
        lines += ["", "Machine speed factor per stage (1.00 = the ladder's first calibration):"]
        lines += [f"- {line}" for line in factors]
    return lines


def markdown(report: dict) -> str:
    """The ladder as markdown: seconds / peak RSS MB per stage and size, then the exponents."""
    stages = tuple(report["sizes"][0]["stages"]) if report["sizes"] else ()
    lines = _sizes_table(report, stages) + _growth_table(report, stages)
    if report.get("cold"):
        lines.append("\nPage cache dropped before each ingestion stage (`--cold`).")
    return "\n".join(lines)
