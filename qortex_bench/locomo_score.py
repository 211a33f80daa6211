"""LoCoMo scoring: evidence recall@k per question, and the per-mode summary of a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def evidence_recall(ranked: Sequence[str], evidence: Sequence[str], where: dict, k: int) -> float:
    """Share of evidence turns whose passage (``where``: turn id -> passage id) is in the top k;
    a turn with no passage counts as missed."""
    top = set(ranked[:k])
    return sum(where.get(e) in top for e in evidence) / len(evidence)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


@dataclass
class Tally:
    """Per mode: recall rows (category, {k: recall}) and abstention counts."""

    rows: list
    abstained_answerable: int = 0
    abstained_adversarial: int = 0
    fallbacks: int = 0
    seconds: float = 0.0


def summary(tally: Tally, ks: Sequence[int], answerable: int, adversarial: int) -> dict:
    def recall(rows) -> dict[str, float | None]:
        return {f"recall@{k}": _mean([r[k] for _, r in rows]) for k in ks}

    cats = sorted({c for c, _ in tally.rows})
    return {
        "recall": recall(tally.rows),
        "by_category": {
            f"{c} {CATEGORIES[c]}": recall([r for r in tally.rows if r[0] == c]) for c in cats
        },
        "abstention": {  # share of questions answered with no_answer
            "adversarial_no_answer": tally.abstained_adversarial / adversarial
            if adversarial
            else None,
            "answerable_no_answer": tally.abstained_answerable / answerable if answerable else None,
        },
        "ms_per_query": 1000 * tally.seconds / max(answerable + adversarial, 1),
        "fallbacks": tally.fallbacks,
    }
