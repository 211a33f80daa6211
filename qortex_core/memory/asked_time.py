"""The moment a question asks about, read from its words: "in October 2023", "during spring
2023", "last summer", "two years ago", relative to when it was asked.

:func:`moment_of` returns the middle of the period the first time expression names (a month,
a season, a year, a week or a day), as an ISO time to the second, or None when the question names
none. A question that asks about the present ("now", "these days") names none. English only,
closed-class words: month and season names, number words up to twelve, ``ago``, ``last``.
"""

from __future__ import annotations

import datetime as dt
import re

MONTHS = (
    "january february march april may june july august september october november december"
).split()
_SEASONS = {"spring": 4, "summer": 7, "autumn": 10, "fall": 10, "winter": 1}  # middle month
_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine "
                                       "ten eleven twelve".split())}  # fmt: skip
_UNITS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_MONTH = "|".join(MONTHS + [m[:3] for m in MONTHS if m != "may"])
_SEASON = "|".join(_SEASONS)
_COUNT = r"\d+|an?|" + "|".join(_NUMBERS)
_PATTERNS = (
    ("month_year", rf"\b({_MONTH})\.?,?\s+(\d{{4}})\b"),
    ("season_year", rf"\b(?:the\s+)?({_SEASON})\s+(?:of\s+)?(\d{{4}})\b"),
    ("ago", rf"\b({_COUNT})\s+(day|week|month|year)s?\s+ago\b"),
    ("last_season", rf"\blast\s+({_SEASON})\b"),
    ("last_month_name", rf"\blast\s+({_MONTH})\b"),
    ("last_unit", r"\blast\s+(week|month|year)\b"),
    ("yesterday", r"\byesterday\b"),
    ("year", r"\b(?:in|during|of|around|by)\s+(\d{4})\b"),
)
_COMPILED = [(name, re.compile(p, re.IGNORECASE)) for name, p in _PATTERNS]


def _month_index(word: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(word.lower()[:3]))


def _middle(start: dt.datetime, end: dt.datetime) -> dt.datetime:
    return start + (end - start) / 2


def _month(year: int, month: int) -> dt.datetime:
    """The middle of a month."""
    start = dt.datetime(year, month, 1, tzinfo=dt.timezone.utc)
    after = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.timezone.utc)
    return _middle(start, after)


def _season(year: int, season: str) -> dt.datetime:
    """The middle of a season of ``year`` (winter: the one that starts in its December)."""
    middle = _SEASONS[season.lower()]
    return _month(year + 1, middle) if middle == 1 else _month(year, middle)


def _count(word: str) -> int:
    word = word.lower()
    return 1 if word in ("a", "an") else int(word) if word.isdigit() else _NUMBERS[word]


def _last_season(season: str, asked: dt.datetime) -> dt.datetime:
    """The middle of the latest such season that ended before ``asked``."""
    for year in range(asked.year, asked.year - 3, -1):
        middle = _season(year, season)
        if middle + dt.timedelta(days=46) <= asked:
            return middle
    return _season(asked.year - 3, season)


def _resolve(name: str, groups: tuple[str, ...], asked: dt.datetime) -> dt.datetime:
    if name == "month_year":
        return _month(int(groups[1]), _month_index(groups[0]))
    if name == "season_year":
        return _season(int(groups[1]), groups[0])
    if name == "ago":
        return asked - dt.timedelta(days=_count(groups[0]) * _UNITS[groups[1].lower()])
    if name == "last_season":
        return _last_season(groups[0], asked)
    if name == "last_month_name":
        month = _month_index(groups[0])
        return _month(asked.year - (month >= asked.month), month)
    if name == "last_unit":
        return asked - dt.timedelta(days=_UNITS[groups[0].lower()])
    if name == "yesterday":
        return asked - dt.timedelta(days=1)
    return _middle(dt.datetime(int(groups[0]), 1, 1, tzinfo=dt.timezone.utc),
                   dt.datetime(int(groups[0]) + 1, 1, 1, tzinfo=dt.timezone.utc))  # fmt: skip


def moment_of(question: str, asked_at: str | None = None) -> str | None:
    """The moment ``question`` asks about (see the module docstring), relative to ``asked_at``
    (an ISO time; None: now); None when it names no time. A moment after ``asked_at`` is
    ``asked_at``."""
    asked = _asked(asked_at)
    found = [(m.start(), name, m.groups()) for name, rx in _COMPILED for m in rx.finditer(question)]
    if not found:
        return None
    _, name, groups = min(found)
    try:
        when = min(_resolve(name, groups, asked), asked)
    except (ValueError, OverflowError):  # a year 0 or past 9999
        return None
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _asked(asked_at: str | None) -> dt.datetime:
    if asked_at is None:
        return dt.datetime.now(dt.timezone.utc)
    from qortex_core.memory.records import parse_time

    text = parse_time(asked_at, "asked_at") or ""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
