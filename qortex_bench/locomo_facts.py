"""LoCoMo's recorded extraction: the files' per-speaker observations as facts about the turns.

A LoCoMo file carries, beside its turns, ``session_N_observation``: for each speaker, statements
the dataset's LLM wrote from the session (``["Melanie ran a charity race for mental health.",
"D2:3"]``), each citing the turns it comes from. Replayed as facts ``(speaker, "observed",
statement)`` of the turns they cite (like HippoRAG's recorded OpenIE for musique_100), they tell
who did what: the attribution check (:mod:`qortex_core.query.attribution`) reads them.
"""

from __future__ import annotations

import re
from typing import Sequence

from qortex_bench.locomo_data import Conversation, Observation

_TURN_ID = re.compile(r"^D:?(\d+):(\d+)$")
_OBSERVATION = re.compile(r"^session_\d+_observation$")


def normalize_evidence(raw: object) -> list[str]:
    """Turn ids from an ``evidence`` list: ``"D8:6; D9:17"`` split, ``D:11:26`` read as
    ``D11:26``, stray spaces dropped; entries that are no turn id are left out."""
    out: list[str] = []
    for item in raw if isinstance(raw, list) else [raw]:
        for part in re.split(r"[;,]", str(item or "")):
            m = _TURN_ID.match("".join(part.split()))
            if m and f"D{m.group(1)}:{m.group(2)}" not in out:
                out.append(f"D{m.group(1)}:{m.group(2)}")
    return out


def read_observations(data: dict, known: set[str]) -> list[Observation]:
    """The ``session_N_observation`` statements that cite at least one turn of ``known``;
    malformed entries are skipped (the field is optional)."""
    out: list[Observation] = []
    for key in sorted(k for k in data if _OBSERVATION.match(k)):
        by_speaker = data[key]
        if not isinstance(by_speaker, dict):
            continue
        for speaker, items in by_speaker.items():
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, list) or not item or not isinstance(item[0], str):
                    continue
                raw = [e for x in item[1:] for e in (x if isinstance(x, list) else [x])]
                cited = [e for e in normalize_evidence(raw) if e in known]
                if cited and item[0].strip() and str(speaker).strip():
                    out.append(Observation(str(speaker).strip(), " ".join(item[0].split()),
                                           tuple(cited)))  # fmt: skip
    return out


def recorded_facts(conv: Conversation) -> dict[str, Sequence[tuple[str, str, str]]]:
    """Turn text (as stored, :attr:`Turn.memory_text`) -> the facts its observations give:
    ``(speaker, "observed", statement)``, the recorded extraction of a conversation."""
    text_of = {t.dia_id: t.memory_text for t in conv.turns}
    out: dict[str, list[tuple[str, str, str]]] = {}
    for obs in conv.observations:
        for dia_id in obs.evidence:
            out.setdefault(text_of[dia_id], []).append((obs.speaker, "observed", obs.text))
    return dict(out.items())  # as the extractor takes it: a mapping to sequences


def extractor_for(conv: Conversation, recorded: bool):
    """The offline extractor, with the conversation's observations as recorded facts when
    ``recorded`` and the file has any."""
    from qortex_core.ingest.extract import OfflineExtractor, WithRecordedFacts

    facts = recorded_facts(conv) if recorded else {}
    if not facts:
        return OfflineExtractor()
    return WithRecordedFacts(OfflineExtractor(), facts, "locomo-observations")
