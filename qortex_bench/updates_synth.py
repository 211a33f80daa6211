"""A held-out updates file, generated: other names, other phrasings, other kinds of value.

``python -m qortex_bench.updates_synth OUT [--seed N]`` writes a file of the updates format
(:mod:`qortex_bench.updates`) that shares no name, no sentence and no question wording with the
dev file: people with homes, employers, phones, instruments, sports, desk floors and team
leads; release codenames with statuses; team meetings with times. Each attribute of a subject
is a chain of statements over time; a changed value is stated in one of several ways (naming
the old value or not, a change word or not). Questions: ``current`` (the last of a chain),
``as_of`` (an earlier link, asked with a date phrase whose whole period it covers) and
``unchanged`` (a chain of one). Deterministic for a seed; a few old statements are written
late, as an agent that learns of an earlier fact afterwards would.
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

FIRST = (
    "Ines Tomas Leila Marek Anouk Hugo Priya Olek Sven Mina Rafael Ada Kenji Lucia Idris".split()
)
LAST = "Moreau Sato Jensen Abara Castillo Petrov Nakamura Olsen Rahman Silva Weber Kaplan".split()
ASKED_AT = datetime(2024, 11, 27, 17, tzinfo=timezone.utc)
START = datetime(2023, 1, 2, tzinfo=timezone.utc)
MONTHS = "January February March April May June July August September October November December"


@dataclass(frozen=True)
class Attribute:
    """How one attribute is stated and asked. Templates use ``{s}`` (subject), ``{v}`` (the
    value), ``{o}`` (the previous value) and ``{p}`` (a date phrase)."""

    values: tuple[str, ...]
    first: tuple[str, ...]
    change: tuple[str, ...]
    now: tuple[str, ...]
    then: tuple[str, ...]


def _a(values: str, first: str, change: str, now: str, then: str) -> Attribute:
    return Attribute(*(tuple(x.strip() for x in part.split("|")) for part in
                       (values, first, change, now, then)))  # fmt: skip


PERSON = {
    "home": _a(
        "Quito|Tallinn|Krakow|Oslo|Dublin|Seville|Turin|Nantes|Malmo|Split|Antwerp|Tartu",
        "{s} resides in {v}.|{s} has an apartment in {v}.|{s} grew up in {v} and still lives "
        "there.",
        "{s} packed up and left {o} for {v}.|{s} now calls {v} home.|{s} has relocated to {v}."
        "|After years in {o}, {s} settled in {v}.",
        "In which city does {s} reside at present?|What city is {s} living in nowadays?"
        "|Where is {s} based today?",
        "In which city did {s} live {p}?|Where was {s} living {p}?",
    ),
    "employer": _a(
        "Pinecrest Labs|Redwood Logistics|Sunfield Insurance|Halcyon Bio|Gridline Power"
        "|Orbit Telecom|Marlow Foods|Keystone Media",
        "{s} is employed by {v}.|{s} has a job at {v}.|{s} works as an analyst at {v}.",
        "{s} quit {o} to join {v}.|{s} accepted an offer from {v}.|{s} is now on the payroll "
        "of {v}.|{s} changed jobs and is with {v} now.",
        "Which company employs {s} today?|Who does {s} work for at the moment?"
        "|Where is {s} employed nowadays?",
        "Which company employed {s} {p}?|Who was {s} working for {p}?",
    ),
    "phone": _a(
        "Pixel 7|Xperia 5|Galaxy S23|Fairphone 4|Nokia G60|Moto G84",
        "{s} carries a {v}.|{s}'s phone is a {v}.",
        "{s} replaced the {o} with a {v}.|{s} got a {v} as a new phone.|{s} switched phones "
        "and uses a {v} now.",
        "What phone does {s} use now?|Which phone is {s} carrying these days?",
        "What phone did {s} use {p}?",
    ),
    "instrument": _a(
        "cello|trumpet|banjo|clarinet|harp|drums|violin|saxophone",
        "{s} plays the {v} in a local band.|{s} practises the {v} every evening.",
        "{s} put down the {o} and picked up the {v}.|{s} has switched to the {v}."
        "|{s} is learning the {v} now instead of the {o}.",
        "Which instrument does {s} play these days?|What instrument is {s} practising now?",
        "Which instrument did {s} play {p}?",
    ),
    "sport": _a(
        "tennis|squash|rowing|climbing|fencing|badminton|volleyball|judo",
        "{s} plays {v} on weekends.|{s} is a keen {v} player.",
        "{s} dropped {o} and took up {v}.|{s} has traded {o} for {v}.|{s} does {v} now.",
        "What sport does {s} do nowadays?|Which sport is {s} into at the moment?",
        "What sport did {s} do {p}?",
    ),
    "floor": _a(
        "2|3|4|5|6|7|8|9|11|12",
        "{s} sits on floor {v}.|{s}'s desk is on floor {v}.",
        "{s} moved desks to floor {v}.|{s}'s desk is now on floor {v}."
        "|{s} went from floor {o} up to floor {v}.",
        "Which floor is {s}'s desk on currently?|On what floor does {s} sit now?",
        "Which floor did {s} sit on {p}?",
    ),
    "lead": _a(
        "",  # another person
        "{s}'s team lead is {v}.|{s} is supervised by {v}.",
        "{s} is now supervised by {v}.|{s}'s team lead changed to {v}.|{s} reports to {v} "
        "since the reshuffle.",
        "Who supervises {s} at present?|Who is {s}'s team lead now?",
        "Who was {s}'s team lead {p}?",
    ),
}
RELEASE = _a(
    "in beta testing|on hold|shipped|cancelled|in design review|in alpha",
    "The {s} release is {v}.|Release {s} is {v}.",
    "The {s} release moved from {o} to {v}.|Release {s} is {v} now.|{s} is now {v}.",
    "What state is the {s} release in now?|How far along is {s} at the moment?",
    "What state was the {s} release in {p}?",
)
MEETING = _a(
    "8:00|9:45|10:00|11:30|13:15|15:00|16:30",
    "The {s} sync is held at {v}.|The {s} review takes place daily at {v}.",
    "The {s} sync was moved to {v}.|Starting next month the {s} sync happens at {v} rather "
    "than {o}.|The {s} sync is now at {v}.",
    "When is the {s} sync held now?|What time does the {s} sync take place these days?",
    "What time was the {s} sync {p}?",
)
CODENAMES = "Orion Basalt Juniper Tundra Calypso Mistral Zephyr Obsidian".split()
TEAMS = "design data security support platform research".split()
ASIDES = (
    "{s} ran a half marathon in the spring.|{s} baked sourdough bread on Sunday.|{s} visited "
    "the dentist on Monday.|{s} is saving up for a kayak.|{s} broke a wrist skiing.|{s} "
    "started a podcast about birds.|{s} repainted the kitchen.|{s} lost a glove on the tram."
).split("|")


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:00:00Z")


def _period(rng: random.Random, start: datetime, end: datetime) -> tuple[str, datetime] | None:
    """A date phrase whose whole period lies in [start, end), and its middle; None if none."""
    months = []
    t = datetime(start.year, start.month, 1, tzinfo=timezone.utc) + timedelta(days=32)
    t = t.replace(day=1)
    while True:
        after = (t + timedelta(days=32)).replace(day=1)
        if after > end or after > ASKED_AT:
            break
        months.append((t, after))
        t = after
    if not months:
        return None
    first, after = rng.choice(months)
    name = f"{MONTHS.split()[first.month - 1]} {first.year}"
    phrase = rng.choice(["in {}", "during {}", "back in {}"]).format(name)
    return phrase, first + (after - first) / 2


class _Writer:
    """Memories and questions, built subject by subject."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.memories: list[dict] = []
        self.questions: list[dict] = []
        self.people = [f"{f} {x}" for f in FIRST for x in LAST]
        self.rng.shuffle(self.people)

    def _time(self) -> datetime:
        days = (ASKED_AT - START).days - 30
        return START + timedelta(days=self.rng.randrange(days), hours=self.rng.randrange(7, 22))

    def memory(self, text: str, when: datetime) -> str:
        mid = f"h{len(self.memories):04d}"
        self.memories.append({"id": mid, "text": text, "time": _iso(when)})
        return mid

    def chain(self, attr: Attribute, subject: str, values: list[str], length: int) -> None:
        """One attribute's statements (``length`` of them) and its questions."""
        times = sorted(self._time() for _ in range(length))
        if any((b - a).days < 40 for a, b in zip(times, times[1:])):
            return self.chain(attr, subject, values, 1) if length > 1 else None
        said = self.rng.sample(values, length)
        ids = []
        for i, (value, when) in enumerate(zip(said, times)):
            pool = attr.first if i == 0 else attr.change
            template = self.rng.choice([t for t in pool if "{o}" not in t or i > 0])
            text = template.format(s=subject, v=value, o=said[i - 1] if i else "")
            ids.append(self.memory(text[0].upper() + text[1:], when))
        self._ask(attr, subject, ids, times)

    def _ask(self, attr: Attribute, subject: str, ids: list[str], times: list[datetime]) -> None:
        rng, n = self.rng, len(self.questions)
        asked = {"asked_at": _iso(ASKED_AT)}
        if len(ids) == 1:
            if rng.random() > 0.4:  # fewer unchanged than changed questions, as in the dev file
                return
            text = rng.choice(attr.now).format(s=subject)
            self.questions.append({"id": f"h_q{n:03d}", "kind": "unchanged", "question": text,
                                   "gold": ids, "stale": [], **asked})  # fmt: skip
            return
        text = rng.choice(attr.now).format(s=subject)
        self.questions.append({"id": f"h_q{n:03d}", "kind": "current", "question": text,
                               "gold": ids[-1:], "stale": ids[:-1], **asked})  # fmt: skip
        k = rng.randrange(len(ids) - 1)
        found = _period(rng, times[k], times[k + 1])
        if found:
            phrase, middle = found
            text = rng.choice(attr.then).format(s=subject, p=phrase)
            self.questions.append({"id": f"h_q{n + 1:03d}", "kind": "as_of", "question": text,
                                   "as_of": _iso(middle), "gold": [ids[k]],
                                   "stale": ids[:k] + ids[k + 1:], **asked})  # fmt: skip


def _values(attr: Attribute, people: list[str], subject: str) -> list[str]:
    return list(attr.values) if attr.values[0] else [p for p in people[:40] if p != subject]


def generate(seed: int = 7, people: int = 60) -> dict:
    """The file as a dict (memories in write order, questions)."""
    w = _Writer(seed)
    rng = w.rng
    for subject in w.people[:people]:
        for name in rng.sample(sorted(PERSON), rng.randint(2, 3)):
            attr = PERSON[name]
            w.chain(attr, subject, _values(attr, w.people, subject), rng.choice([1, 2, 2, 3]))
        for template in rng.sample(ASIDES, 2):
            w.memory(template.format(s=subject), w._time())
    for codename in CODENAMES:
        w.chain(RELEASE, codename, list(RELEASE.values), rng.choice([2, 3]))
    for team in TEAMS:
        w.chain(MEETING, team, list(MEETING.values), rng.choice([1, 2, 3]))
    return {"name": f"updates_synth_{seed}", **_ordered(w, rng)}


def _ordered(w: _Writer, rng: random.Random) -> dict:
    """Memories in event-time order, a twentieth of them written last (learned late)."""
    memories = sorted(w.memories, key=lambda m: m["time"])
    late = rng.sample(range(len(memories)), len(memories) // 20)
    order = [m for i, m in enumerate(memories) if i not in late] + [memories[i] for i in late]
    return {"memories": order, "questions": w.questions}


def main(argv: list[str] | None = None) -> int:
    """Write a generated updates file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    args.out.write_text(json.dumps(generate(args.seed), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
