"""Attribution check: a question about one participant whose answer is about another.

In a conversation's memory, "What did Caroline realize after her charity race?" is answered
by nothing when it was Melanie who ran the race, yet its best passages are as relevant as an
answerable question's (the detail is there, said by someone else). Facts whose subject is a
participant (an extractor's statements about each speaker, e.g. ``(Melanie, observed, Melanie
ran a charity race for mental health)``) tell who did what. The check:

1. the snapshot is a conversation (:attr:`SnapshotView.sequenced` > 0) whose turns are written
   ``Name: text``; its participants are the names heading at least ``min_turns`` turns;
2. the query names exactly one participant ``X`` and ``X`` and another participant are the
   subjects of some facts;
3. the query without ``X``'s name is embedded, and its best cosine over facts about ``X`` is
   compared with its best over facts about the others: when another participant's fact is
   better by ``margin`` or more, the query is answered ``no_answer``.

Measured on the five LoCoMo conversations with their recorded observations as facts
(docs/ablation.md): margin 0.05 abstains on about half of the adversarial (category 5)
questions and on about 6 % of the answerable ones. Snapshots that are not conversations, and
queries that name no participant or two, are never checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow.compute as pc

from qortex_core.query.snapshot_view import SnapshotView
from qortex_core.storage import ids
from qortex_core.storage.model import SPEAKER_LABEL


@dataclass(frozen=True)
class AttributionConfig:
    """The attribution check.

    Attributes:
        enabled: check conversation snapshots at all.
        margin: abstain when the best fact about another participant beats the best fact
            about the named one by this much cosine (query without the name).
        min_turns: a name is a participant when it heads at least this many turns.
    """

    enabled: bool = True
    margin: float = 0.05
    min_turns: int = 2


@dataclass(frozen=True)
class Participants:
    """A conversation's participants and the fact rows whose subject each one is.

    Attributes:
        names: participant names as written in the turns, most turns first.
        fact_rows: name -> (k,) int64 rows of the facts whose subject is that participant.
    """

    names: tuple[str, ...]
    fact_rows: dict[str, np.ndarray]

    @classmethod
    def of(cls, view: SnapshotView, config: AttributionConfig) -> "Participants":
        """The participants of a conversation snapshot (none for any other snapshot)."""
        if view.sequenced <= 0 or view.n_passages == 0 or view.fact_nodes.shape[0] == 0:
            return cls((), {})
        heads = pc.extract_regex(view.passages.table["text"], SPEAKER_LABEL)
        counts = pc.value_counts(pc.struct_field(heads, "name").drop_null()).to_pylist()
        names = tuple(
            c["values"]
            for c in sorted(counts, key=lambda c: (-c["counts"], c["values"]))
            if c["counts"] >= config.min_turns
        )
        subjects = np.asarray(view.fact_nodes[:, 0], dtype=np.int64)  # (n_facts,)
        unique = np.unique(subjects)  # (k,) phrase rows that are the subject of some fact
        key_of = {ids.normalize_phrase(n): n for n in names}
        rows: dict[str, list[int]] = {}
        for node, name in zip(unique.tolist(), view.node_names.take(unique)):
            who = key_of.get(ids.normalize_phrase(name or ""))
            if who is not None:
                rows.setdefault(who, []).append(node)
        fact_rows = {
            who: np.flatnonzero(np.isin(subjects, nodes)).astype(np.int64)
            for who, nodes in rows.items()
        }
        return cls(names, fact_rows)


@dataclass(frozen=True)
class Misattributed:
    """Why a query was withheld: what it asks is said of ``holder``, not of ``named``."""

    named: str
    holder: str
    named_cosine: float
    holder_cosine: float

    @property
    def note(self) -> str:
        return (
            f"no answer: what the query asks is said of {self.holder}, not {self.named} "
            f"(best fact cosine {self.holder_cosine:.2f} against {self.named_cosine:.2f})"
        )


class Checker:
    """The check as a retriever runs it: participants read at the first query that needs them.

    Args:
        view: the snapshot's arrays; embed: unit embedding of one text.
    """

    def __init__(self, view: SnapshotView, embed: Callable[[str], np.ndarray]) -> None:
        self.view, self.embed = view, embed
        self._participants: Participants | None = None

    def __call__(self, text: str, config: AttributionConfig) -> Misattributed | None:
        if not config.enabled or self.view.sequenced <= 0:
            return None
        if self._participants is None:
            self._participants = Participants.of(self.view, config)
        return check(text, self._participants, self.view.fact_vectors, self.embed, config)


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"\b" + re.escape(name) + r"(?:'s|\u2019s)?\b")


def named_in(text: str, names: Sequence[str]) -> list[str]:
    """The participants ``text`` names (whole words, as written)."""
    return [n for n in names if _name_pattern(n).search(text)]


def without_name(text: str, name: str) -> str:
    """``text`` with ``name`` (and its possessive) taken out."""
    return " ".join(_name_pattern(name).sub(" ", text).split())


def check(
    text: str,
    participants: Participants,
    fact_vectors: np.ndarray,
    embed: Callable[[str], np.ndarray],
    config: AttributionConfig = AttributionConfig(),
) -> Misattributed | None:
    """A :class:`Misattributed` when the query's named participant is not who its best
    matching facts are about; None otherwise (or when the check does not apply).

    Args:
        text: the query; participants: from :meth:`Participants.of`.
        fact_vectors: (n_facts, d) unit fact embeddings of the snapshot.
        embed: unit embedding of one text (called at most once, only when the check applies).
    """
    if not config.enabled or len(participants.names) < 2:
        return None
    named = named_in(text, participants.names)
    if len(named) != 1 or named[0] not in participants.fact_rows:
        return None
    own = participants.fact_rows[named[0]]
    others = {n: r for n, r in participants.fact_rows.items() if n != named[0] and r.size}
    stripped = without_name(text, named[0])
    if not own.size or not others or not stripped:
        return None
    vector = embed(stripped)  # (d,)
    best_own = float((fact_vectors[own] @ vector).max())  # (k_own, d) @ (d,)
    holder, best_other = max(
        ((n, float((fact_vectors[r] @ vector).max())) for n, r in others.items()),
        key=lambda item: item[1],
    )
    if best_other - best_own >= config.margin:
        return Misattributed(named[0], holder, best_own, best_other)
    return None
