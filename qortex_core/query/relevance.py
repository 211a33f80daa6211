"""Relevance in [0, 1] that means the same in every mode, and abstention below a threshold.

Ranking scores are not comparable across modes (min-max PPR mass, fused ranks, BM25), so a
hit's ``relevance`` is computed from what every mode and tier shares: the embedder's cosine
between the query and the passage. It is a logistic curve

    relevance = 1 / (1 + exp(-(cosine - center) / width))

so 0.5 means "as likely on-topic as not". A query abstains (``no_answer``) when no allowed
passage reaches ``min_relevance``: the best relevance is that of the best dense passage,
whatever the mode, so every mode abstains on the same queries. Below the threshold only
the answer as a whole is withheld; a graph hit with a low cosine (a bridge passage) is
still returned when something else in the answer is relevant.

Calibration (bundled all-MiniLM-L6-v2; ``center`` 0.35, ``width`` 0.05): the best passage
cosine of 50 gibberish and off-topic queries (qortex_bench/data/offtopic_queries.txt)
against the 1,890 musique_100 passages has median 0.27 and 95th percentile 0.34; that of
answerable questions has 5th percentile 0.43 on musique_100 (minimum 0.37) and 0.44 on
LoCoMo (760 questions). ``center`` sits between the two: a weak best match is
withheld, while the weakest answerable questions seen still answer. Lexical evidence
is not used: off-topic questions share common words with passages, and BM25 scores are
not comparable across corpora. Another embedder has another cosine scale: set
``center`` and ``width`` for it (``RetrievalConfig.relevance``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from qortex_core.errors import QueryError


@dataclass(frozen=True)
class RelevanceConfig:
    """The logistic map from query-passage cosine to relevance.

    Attributes:
        center: cosine at which relevance is 0.5 (bundled MiniLM: 0.35, see module doc).
        width: cosine change from relevance 0.5 to 0.73 (smaller: a sharper step).
    """

    center: float = 0.35
    width: float = 0.05


def score(cosines: np.ndarray, config: RelevanceConfig = RelevanceConfig()) -> np.ndarray:
    """(n,) relevance in [0, 1] of passages from their (n,) query cosines."""
    z = (np.asarray(cosines, dtype=np.float64) - config.center) / max(config.width, 1e-6)
    return (1.0 / (1.0 + np.exp(-np.clip(z, -50.0, 50.0)))).astype(np.float32)


def of_fresh(config: RelevanceConfig = RelevanceConfig()):
    """The relevance of a fresh-tier hit (anything with a query ``cosine``), calibrated alike."""
    return lambda hit: float(score(np.array([hit.cosine]), config)[0])


def best_of(
    cosines: np.ndarray, config: RelevanceConfig, allowed: np.ndarray | None = None
) -> float:
    """The highest relevance among ``allowed`` passages (0 when none is allowed), from their
    (n,) cosines: the map is monotone, so it is the relevance of the best allowed cosine, and
    no other passage is mapped."""
    cos = np.asarray(cosines)
    if not cos.size or (allowed is not None and not allowed.any()):
        return 0.0
    top = cos.max() if allowed is None else np.max(cos, where=allowed, initial=-np.inf)
    return float(score(np.array([top]), config)[0])


def threshold(value: object, default: float) -> float:
    """The ``min_relevance`` to apply (None: ``default``); 0 never abstains.

    Raises:
        QueryError: not a number in [0, 1].
    """
    if value is None:
        value = default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not 0.0 <= value <= 1.0
    ):
        raise QueryError(f"min_relevance must be a number from 0 to 1, got {value!r}")
    return float(value)


def settle(result, minimum: float):
    """A result after fresh records were merged in: an abstained one answers when a fresh
    hit reaches ``minimum`` (with every merged hit), else it stays empty and ``no_answer``."""
    if not getattr(result, "no_answer", False):
        return result
    if minimum > 0 and any((h.relevance or 0.0) >= minimum for h in result.passages):
        return replace(result, no_answer=False, fallback=None)
    return replace(result, passages=[])


def abstention_note(best_relevance: float, minimum: float) -> str:
    """The one line a result carries when it abstains."""
    return f"no answer: no passage reaches relevance {minimum:.2f} (best {best_relevance:.2f})"
