"""LoCoMo's records as read from a file: turns, questions, per-speaker observations and the
conversation that holds them (read by :mod:`.locomo`, used by :mod:`.locomo_facts` and
:mod:`.locomo_memory`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Observation:
    """One of the file's per-speaker observations (``session_N_observation``): a statement
    about ``speaker`` written from the turns ``evidence`` cites (the dataset's LLM output)."""

    speaker: str
    text: str
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: ``dia_id`` like ``D1:3``, the session's time as ISO 8601 UTC."""

    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str = ""
    time: str | None = None

    @property
    def memory_text(self) -> str:
        """The text stored for this turn: speaker, words, and the caption of a shared photo."""
        photo = f" [shares a photo: {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{photo}"


@dataclass(frozen=True)
class LocomoQuestion:
    id: str
    text: str
    answer: str
    evidence: tuple[str, ...]  # turn ids, normalised, only those the conversation has
    category: int


@dataclass(frozen=True)
class Conversation:
    """A conversation, its answerable questions and its adversarial ones, kept apart."""

    name: str  # tenant name
    path: Path
    turns: tuple[Turn, ...]
    questions: tuple[LocomoQuestion, ...]  # categories 1-4 with at least one known evidence turn
    adversarial: tuple[LocomoQuestion, ...]  # category 5
    no_evidence: int  # answerable questions left out: no evidence turn found in the conversation
    observations: tuple[Observation, ...] = ()  # those that cite a turn of the conversation
