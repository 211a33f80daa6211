"""What a short statement is about: its subject, the values it names, and its predicate.

Supersession (:mod:`qortex_core.memory.supersede`) compares two statements of the same subject.
This module reads a statement with plain English rules, no model and no word list of any
domain, only closed-class words (articles, pronouns, prepositions, auxiliaries, time words):

- **subject**: the first run of capitalised words (``Goran Lindqvist``, ``Project Harbor``;
  a possessive ends the run, a sentence-initial function word or ``Label:`` is skipped); a
  statement with no name has as subject the first content word of its leading noun phrase
  (``infra`` in "From next week the infra team meets at 9:00").
- **values**: the other names and the numbers (``Bergen``, ``Acme Robotics``, ``8:30``).
- **content**: the other content words, crudely stemmed (values of statements that name none).
- **predicate**: the text with the subject replaced by "someone", what is embedded to compare
  attributes (the name would otherwise dominate the vector).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"[^\W\d_][\w\-]*(?:'s|’s)?|\d[\d:.,/]*\d|\d|[^\w\s]", re.UNICODE)
FUNCTION_WORDS = frozenset(
    """a an the this that these those some any every each no all both either neither
    i me my mine we us our ours you your yours he him his she her hers it its they them their
    theirs someone somebody something who whom whose which what when where why how
    is are was were be been being am do does did done has have had having will would shall
    should can could may might must not nor and or but so yet if then than as because while
    of to in on at by for from with without into onto over under about after before since
    until till during between among through across per via against toward towards upon
    there here also just still again already only even ever never always often usually
    now currently today yesterday tomorrow tonight recently lately soon later earlier
    last next ago week weeks month months year years day days
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december
    new old instead anymore longer says said according""".split()
)
_PREPOSITIONS = frozenset(
    "of to in on at by for from with into over under about after before since until during "
    "starting beginning as".split()
)
_OPENERS = _PREPOSITIONS | frozenset("when while once although though because".split())
_DETERMINERS = frozenset("a an the this that these those our their my your his her its".split())


@dataclass(frozen=True)
class Statement:
    """A statement as supersession sees it (see the module docstring)."""

    subject: frozenset[str]
    named: bool  # the subject is a name (else a leading content word)
    values: frozenset[str]
    content: frozenset[str]
    predicate: str
    phrases: frozenset[str] = frozenset()  # the values as phrases ("pixel 7", "8:30")


def _base(token: str) -> str:
    return token[:-2] if token.endswith(("'s", "’s")) else token


def _capitalised(tokens: list[str], i: int) -> bool:
    """A name word: capitalised and no function word ("The", "From", "Friday" are not)."""
    word = _base(tokens[i])
    return word[:1].isupper() and word.lower() not in FUNCTION_WORDS


def _runs(tokens: list[str], start: int) -> list[tuple[int, int]]:
    """(start, end) index spans of capitalised runs from ``start`` (a possessive ends one)."""
    runs, begin = [], None
    for i in range(start, len(tokens)):
        if _capitalised(tokens, i):
            begin = i if begin is None else begin
            if _base(tokens[i]) != tokens[i]:
                runs.append((begin, i + 1))
                begin = None
        elif begin is not None:
            runs.append((begin, i))
            begin = None
    if begin is not None:
        runs.append((begin, len(tokens)))
    return runs


def _label_end(tokens: list[str]) -> int:
    """Index after a leading ``Label:`` (``Update:``), else 0."""
    return 2 if len(tokens) > 2 and tokens[1] == ":" else 0


def _clause_end(tokens: list[str], start: int) -> int:
    """Index after a leading adverbial clause closed by a comma ("After years in Oslo, ..."),
    else ``start``: the subject comes after it."""
    if start >= len(tokens) or tokens[start].lower() not in _OPENERS:
        return start
    comma = next((i for i in range(start, min(start + 12, len(tokens))) if tokens[i] == ","), None)
    return comma + 1 if comma is not None and comma + 1 < len(tokens) else start


def _leading_word(tokens: list[str], start: int) -> int | None:
    """Index of the first content word of the leading noun phrase (after a leading
    prepositional phrase, up to its determiner), or None."""
    i = start
    if i < len(tokens) and tokens[i].lower() in _PREPOSITIONS:
        near = range(i + 1, min(i + 7, len(tokens)))
        ahead = [j for j in near if tokens[j].lower() in _DETERMINERS]
        i = ahead[0] if ahead else i + 1
    for j in range(i, len(tokens)):
        word = tokens[j].lower()
        if word.isalpha() and word not in FUNCTION_WORDS:
            return j
    return None


def _weak(tokens: list[str], run: tuple[int, int], start: int) -> bool:
    """A one-word run that opens the sentence before a lowercase word: maybe a name, maybe a
    capitalised common noun ("Ticket number 4"), so no name."""
    nxt = tokens[run[1]] if run[1] < len(tokens) else ""
    return run == (start, start + 1) and _base(tokens[start]) == tokens[start] and nxt.islower()


def _numbered(tokens: list[str], at: int | None) -> frozenset[str]:
    """Numbers inside the leading noun phrase ("ticket number 4"): part of the subject."""
    found = set()
    for token in tokens[at + 1 :] if at is not None else []:
        if token[:1].isdigit():
            found.add(token)
        elif not token.isalpha() or token.lower() in FUNCTION_WORDS:
            break
    return frozenset(found)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _numbered_name(tokens: list[str], run: tuple[int, int]) -> tuple[int, int]:
    """A name run with the numbers right after it: an identifier ("Note 12", "Room 4"), so
    "Note 12: ..." and "Note 13: ..." are about two subjects."""
    end = run[1]
    while (
        end < len(tokens)
        and tokens[end][:1].isdigit()
        and _base(tokens[end - 1]) == tokens[end - 1]
    ):
        end += 1
    return run[0], end


def _subject_run(runs: list[tuple[int, int]], start: int) -> int | None:
    """Index in ``runs`` of the first run at or after ``start``."""
    return next((i for i, run in enumerate(runs) if run[0] >= start), None)


def parse(text: str) -> Statement:
    """Read one statement (see the module docstring)."""
    tokens = _TOKEN.findall(text)
    start = _label_end(tokens)
    runs = _runs(tokens, start)
    start = _clause_end(tokens, start)
    first = _subject_run(runs, start)
    # "Ticket number 4 was ...": no name
    weak = first is not None and _weak(tokens, runs[first], start)
    if first is not None and not weak:
        span = _numbered_name(tokens, runs[first])
        subject = frozenset(_base(t).lower() for t in tokens[span[0] : span[1]])
        named, others = True, runs[:first] + runs[first + 1 :]
    else:
        at = _leading_word(tokens, start)
        span = (at, at + 1) if at is not None else (0, 0)
        subject = frozenset({tokens[at].lower()}) if at is not None else frozenset()
        subject |= _numbered(tokens, at)
        named = False
        later = runs[first + 1 :] if weak and first is not None else []
        others = [r for r in runs if r[1] <= start] + later
    values = {_base(t).lower() for a, b in others for t in tokens[a:b]}
    values |= {t for i, t in enumerate(tokens) if t[:1].isdigit() and not span[0] <= i < span[1]}
    values -= subject
    inside = {i for a, b in others for i in range(a, b)} | set(range(*span))
    content = {
        _stem(t.lower())
        for i, t in enumerate(tokens)
        if i not in inside and t.isalpha() and t.lower() not in FUNCTION_WORDS
    }
    predicate = _predicate(tokens, span, named)
    phrases = frozenset(p for p in _phrases(tokens, others, span) if p not in subject)
    return Statement(subject, named, frozenset(values), frozenset(content), predicate, phrases)


def _phrases(tokens: list[str], runs: list[tuple[int, int]], span: tuple[int, int]) -> frozenset:
    """The value phrases: each name run with the numbers right after it ("Pixel 7", "Model
    3"), and each other number."""
    out, used = set(), set(range(*span))
    for a, b in runs:
        while b < len(tokens) and tokens[b][:1].isdigit():
            b += 1
        out.add(" ".join(_base(t).lower() for t in tokens[a:b]))
        used.update(range(a, b))
    out |= {t for i, t in enumerate(tokens) if t[:1].isdigit() and i not in used}
    return frozenset(out)


def _predicate(tokens: list[str], span: tuple[int, int], named: bool) -> str:
    """The text with a named subject replaced by "someone" ("someone's"), a leading word
    dropped."""
    if span[1] <= span[0]:
        return " ".join(tokens)
    possessive = _base(tokens[span[1] - 1]) != tokens[span[1] - 1]
    stand_in = ["someone's" if possessive else "someone"] if named else []
    return " ".join(tokens[: span[0]] + stand_in + tokens[span[1] :])


_SENTENCE_BREAK = re.compile(r"\.\s+[A-Z]")
MAX_STATEMENT_WORDS = 40


def is_statement(text: str) -> bool:
    """``text`` reads as one declarative statement, what supersession compares: one sentence
    of at most ``MAX_STATEMENT_WORDS`` words, neither a question nor an exclamation. A turn of
    a conversation ("Melanie: Wow, Caroline! ... What's the best part?") is none: its sentences
    are not one attribute's value."""
    if "?" in text or "!" in text or _SENTENCE_BREAK.search(text.strip().rstrip(".")):
        return False
    return len(text.split()) <= MAX_STATEMENT_WORDS


def same_subject(a: Statement, b: Statement) -> bool:
    """Both about one subject: equal names (or one name within the other: ``Project Harbor``
    and ``the Harbor project``), or the same leading word when neither names one."""
    if not a.subject or not b.subject or a.named != b.named:
        return False
    if not a.named:
        return a.subject == b.subject
    return a.subject <= b.subject or b.subject <= a.subject


def same_value(new: Statement, old: Statement) -> bool:
    """``new`` restates ``old``: every value it names is one ``old`` names (or, when neither
    names a value, the same content words)."""
    if new.values or old.values:
        return bool(new.values) and new.values <= old.values
    return new.content - old.subject == old.content - new.subject


def mentions(new: Statement, old: Statement) -> bool:
    """``new`` names a value of ``old`` beside a value of its own ("moved from Bergen to Lyon"
    after "lives in Bergen"): the usual shape of a stated change."""
    return bool(new.values & old.values) and not new.values <= old.values
