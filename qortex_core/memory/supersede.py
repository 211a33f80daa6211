"""Supersession: a newer statement of the same attribute of the same subject closes the older.

At write time (:func:`link_revisions`) each new memory is compared with the live memories of
the same subject (:func:`~qortex_core.memory.statements.same_subject`); when they state the same
attribute (:func:`same_attribute`) a ``supersede`` row linking the two is appended in the same
commit as the memory, so a crash leaves both or neither. A link only says "same attribute";
the direction comes from the fold (:class:`Timeline`), the same in every process: linked
records form chains, ordered by **event time** (never write order), and each record is closed
by the first later record of its chain that states a different value (``valid_until`` = that
record's event time, ``superseded_by`` = its id). Restating the same value closes nothing; an
older fact written late falls into its place in the chain. Nothing is deleted: a forgotten
successor reopens its predecessor; history keeps every statement.

The attribute test needs no LLM: the predicates (subject replaced by "someone"), the predicates
with values masked, and the values themselves are compared by cosine (:mod:`facets`), plus the
two shapes a stated change usually takes: naming the old value ("moved from Bergen to Lyon"),
or a change word ("now", "instead", "switched") where no value is named. When both statements
name values, the store says whether their values are of one kind: the frames of the two
statements (masked predicates, "someone resides in X") have held a common value, in any
subject's statements ("resides in Oslo" and "packed up and left Quito for Oslo"). Values of one
kind need only a low score (the phrasings may share no word); values never seen in one frame
need a high one (a phone and an employer are not one attribute however alike the sentences).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa

from qortex_core.memory.facets import Facet, FacetStore, masked_predicate
from qortex_core.memory.records import Revision, revision_rows, utc_now
from qortex_core.memory.statements import (
    Statement,
    is_statement,
    mentions,
    parse,
    same_subject,
)
from qortex_core.memory.timeline import LINK_OP, Timeline, TimelineCache
from qortex_core.storage import ids
from qortex_core.storage.store import arrow_to_vectors

LINK_PREFIX = "s_"
_CHANGE = re.compile(
    r"\b(now|no longer|anymore|instead|new|newly|switched|changed|moved|update|updated|"
    r"replaced|became|becomes)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SupersedeConfig:
    """Weights of the attribute score ``cos(predicates) + masked x cos(masked predicates) +
    values x cos(values)`` (statements without values: ``+ change`` when the newer one says a
    change word instead of ``values x ...``) and the scores from which two statements state one
    attribute: ``threshold`` when either names no value, ``kin_threshold`` when their values
    are of one kind (their frames shared a value), ``foreign_threshold`` when not. Chosen on
    the updates dev file and a generated held-out file (:mod:`qortex_bench.updates_synth`) as
    the point where few statements of different attributes are linked while most chains are
    complete. ``candidates``: statements of the subject compared with a new one, the closest
    by stored vector (a subject with thousands of statements costs a write no more)."""

    masked: float = 0.5
    values: float = 0.5
    change: float = 0.3
    threshold: float = 0.72
    kin_threshold: float = 0.3
    foreign_threshold: float = 0.9
    candidates: int = 48
    links: int = 3


def _cos(a, b) -> float:
    return float(a @ b)


def attribute_score(
    new: Facet, old: Facet, new_text: str, config: SupersedeConfig = SupersedeConfig()
) -> float:
    """``cos(predicates) + masked x cos(masked) + values x cos(values)`` (or ``+ change``
    when neither names a value and ``new_text`` says a change word)."""
    score = _cos(new.predicate, old.predicate) + config.masked * _cos(new.masked, old.masked)
    if new.values is not None and old.values is not None:
        score += config.values * _cos(new.values, old.values)
    elif new.values is None and old.values is None and _CHANGE.search(new_text):
        score += config.change
    return score


def same_attribute(
    new: Facet,
    old: Facet,
    new_text: str,
    config: SupersedeConfig = SupersedeConfig(),
    kin: bool | None = None,
) -> bool:
    """``new`` and ``old`` (of one subject) state the same attribute (see the module doc).
    ``kin``: whether their values are of one kind (None: unknown, the plain threshold)."""
    if mentions(new.statement, old.statement):
        return True
    score = attribute_score(new, old, new_text, config)
    if kin is None or not (new.statement.phrases and old.statement.phrases):
        return score >= config.threshold
    return score >= (config.kin_threshold if kin else config.foreign_threshold)


def frame(statement: Statement) -> str:
    """The statement's frame: its masked predicate, lowercased ("someone resides in x .")."""
    return masked_predicate(statement).lower()


def link_id(a: str, b: str) -> str:
    """The id of the link row between records ``a`` and ``b`` (either order)."""
    first, second = sorted((a, b))
    return LINK_PREFIX + ids.digest(first, second, size=12)


class SubjectIndex:
    """Live written records by subject word, and the values each frame held, kept in step
    with a memory state."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._texts: dict[str, str] = {}
        self._statements: dict[str, Statement] = {}
        self._by_word: dict[str, set[frozenset[str]]] = {}  # word -> subjects holding it
        self._by_subject: dict[tuple[frozenset[str], bool], set[str]] = {}  # -> records
        self._held: dict[str, dict[str, int]] = {}  # frame -> value phrase -> live records
        self._frames: dict[str, dict[str, int]] = {}  # value phrase -> frame -> live records
        self._named: dict[str, int] = {}  # named subjects as phrases -> live records
        self._at: tuple[int, int] | None = None  # the state (id, generation) last synced
        self._seen = (0, 0)  # (id of the state, its rows absorbed) at the last sync

    def sync(self, state) -> None:
        """Index the state's live records (only those whose rows arrived since the last sync)."""
        if self._at == (id(state), state.generation):
            return
        self._at = (id(state), state.generation)
        if self._seen[0] != id(state):
            self._reset()  # another state: index it whole
            self._at = (id(state), state.generation)
        changed, count = state.changed_since(self._seen[1])
        self._seen = (id(state), count)
        for rid in changed:
            text = state.current[rid]["text"] if state.is_live(rid) else None
            if self._texts.get(rid) != text:
                self._drop(rid)
                if text is not None:
                    self._add(rid, text)

    def _add(self, rid: str, text: str) -> None:
        self._texts[rid] = text
        if not is_statement(text):
            return
        statement = parse(text)
        self._statements[rid] = statement
        key = (statement.subject, statement.named)
        self._by_subject.setdefault(key, set()).add(rid)
        for word in statement.subject:
            self._by_word.setdefault(word, set()).add(statement.subject)
        self._count(statement, 1)

    def _count(self, statement: Statement, step: int) -> None:
        shape = frame(statement)
        if statement.named:
            _bump(self._named, " ".join(sorted(statement.subject)), step)
        for phrase in statement.phrases:
            _bump(self._held.setdefault(shape, {}), phrase, step)
            _bump(self._frames.setdefault(phrase, {}), shape, step)

    def _drop(self, rid: str) -> None:
        statement = self._statements.pop(rid, None)
        self._texts.pop(rid, None)
        if statement is not None:
            self._by_subject.get((statement.subject, statement.named), set()).discard(rid)
            self._count(statement, -1)

    def kin(self, new: Statement, old: Statement) -> bool:
        """The values of ``new`` and ``old`` are of one kind: their frames (with their own
        values) held a common value, or both held a value of one third frame ("is employed
        by" and "accepted an offer from" each share a company with "is on the payroll of"), or
        both name a subject the store has statements about (two people: "reports to Ines
        Sato", "team lead is Hugo Weber")."""
        mine = set(self._held.get(frame(new), ())) | new.phrases
        theirs = set(self._held.get(frame(old), ())) | old.phrases
        if mine & theirs or (self._entity(new) and self._entity(old)):
            return True
        return bool(self._neighbours(mine) & self._neighbours(theirs))

    def _entity(self, statement: Statement) -> bool:
        """``statement`` names as a value a subject of other statements."""
        return any(" ".join(sorted(p.split())) in self._named for p in statement.phrases)

    def _neighbours(self, phrases: set[str]) -> set[str]:
        """Frames that held any of ``phrases``."""
        return {shape for p in phrases for shape in self._frames.get(p, ())}

    def same_subject(self, statement: Statement) -> set[str]:
        """Live records about the subject of ``statement``."""
        subjects = set().union(*(self._by_word.get(w, set()) for w in statement.subject))
        out: set[str] = set()
        for subject in subjects:
            records = self._by_subject.get((subject, statement.named))
            if records and same_subject(statement, self._statements[next(iter(records))]):
                out |= records
        return out


def _bump(counts: dict[str, int], key: str, step: int) -> None:
    counts[key] = counts.get(key, 0) + step
    if counts[key] <= 0:
        del counts[key]


def _closest(ids: list[str], vector, vector_of, limit: int) -> list[str]:
    """At most ``limit`` of ``ids``, closest first by their vectors (``vector_of``) to
    ``vector`` (by id when there is no vector to compare)."""
    ids = sorted(ids)
    if vector is None or not ids:
        return ids[:limit]
    dim = vector.shape[0]
    stacked = np.stack([v if (v := vector_of(r)) is not None else np.zeros(dim) for r in ids])
    order = np.argsort(-(stacked @ vector), kind="stable")[:limit]  # (limit,)
    return [ids[i] for i in order]


def link_revisions(
    state,
    facets: FacetStore,
    index: SubjectIndex,
    revisions: Sequence[Revision],
    writer: str,
    config: SupersedeConfig = SupersedeConfig(),
    vectors: dict | None = None,
    resolver=None,
) -> list[Revision]:
    """``supersede`` rows linking each new revision to the live records of its attribute.
    ``vectors``: revision id -> its (d,) vector, to compare only the ``candidates`` closest
    statements of a subject; ``resolver``: an :class:`~qortex_core.memory.resolve.LLMResolver`
    that decides each candidate pair whose attribute score reaches its ``ask_floor`` (None:
    the offline test alone)."""
    index.sync(state)
    out: list[Revision] = []
    now = utc_now()
    written = [r for r in revisions if r.op in ("remember", "update") and is_statement(r.text)]
    mine = dict(zip([r.text for r in written], facets.facets([r.text for r in written])))
    vectors = vectors or {}
    batch = {r.id: r for r in written}

    def vector_of(rid: str):
        return vectors.get(rid) if rid in batch else state.vector_of(rid)

    for i, rev in enumerate(written):
        new = mine[rev.text]
        near = [r for r in index.same_subject(new.statement) if r != rev.id and r not in batch]
        near += [o.id for o in written[:i] if same_subject(new.statement, mine[o.text].statement)]
        near = _closest(near, vectors.get(rev.id), vector_of, config.candidates)
        old = [r for r in near if r not in batch]
        theirs = dict(zip(old, facets.facets([state.current[r]["text"] for r in old])))
        made = 0
        for rid in near:
            facet = theirs[rid] if rid in theirs else mine[batch[rid].text]
            kin = index.kin(new.statement, facet.statement)
            same = same_attribute(new, facet, rev.text, config, kin)
            if resolver is not None:
                same = _resolved(resolver, same, facet, new, rev.text, state, batch, rid, config)
            if same:
                out.append(_link(rid, rev, now, writer))
                made += 1
            if made >= config.links:
                break
    return out


def _resolved(resolver, offline: bool, old: Facet, new: Facet, text: str, state, batch, rid,
              config: SupersedeConfig) -> bool:  # fmt: skip
    """The resolver's decision for one pair (the offline one below its floor or on failure)."""
    if attribute_score(new, old, text, config) < resolver.ask_floor:
        return offline
    earlier = batch[rid].text if rid in batch else state.current[rid]["text"]
    answer = resolver.same_attribute(earlier, text)
    return offline if answer is None else answer


def _link(rid: str, rev: Revision, now: str, writer: str) -> Revision:
    """The ``supersede`` row linking record ``rid`` and the new revision ``rev``."""
    target = " ".join(sorted((rid, rev.id)))
    return Revision(
        link_id(rid, rev.id), 1, LINK_OP, "", None, now, None, rev.domain, writer, target
    )


class Supersession:
    """One memory's supersession: its facets, subject index and folded timeline."""

    def __init__(
        self, embedder, config: SupersedeConfig = SupersedeConfig(), resolver=None
    ) -> None:
        self.facets = FacetStore(embedder)
        self.index = SubjectIndex()
        self.timelines = TimelineCache()
        self.config = config
        if resolver is None:  # the environment's (QORTEX_SUPERSEDE_RESOLVE=llm), else offline
            from qortex_core.memory.resolve import from_env

            resolver = from_env()
        self.resolver = resolver

    def link_rows(self, state, revisions: Sequence[Revision], writer: str, dim: int, vectors=None):
        """The ``supersede`` rows for ``revisions`` as table rows of width ``dim`` (None: none);
        ``vectors``: revision id -> (d,) vector."""
        links = link_revisions(
            state, self.facets, self.index, revisions, writer, self.config, vectors, self.resolver
        )
        if not links:
            return None
        zeros = np.zeros((len(links), dim), np.float32)
        return revision_rows(links, [{}] * len(links), zeros, "")

    def linked(self, rows: pa.Table, state, revisions: Sequence[Revision], writer: str):
        """``rows`` (new revisions) with their link rows appended (one commit)."""
        dim = rows.schema.field("vector").type.list_size
        ids = rows["id"].to_pylist()
        vectors = dict(zip(ids, arrow_to_vectors(rows["vector"], dim)))  # id -> (d,)
        return with_links(rows, self.link_rows(state, revisions, writer, dim, vectors))

    def closed(self, state) -> frozenset[str]:
        """Records a later statement superseded."""
        return self.timeline(state).superseded()

    def timeline(self, state) -> Timeline:
        """The state's timeline (folded again only after the state changed)."""
        return self.timelines.of(state)


def with_links(rows: pa.Table, links: pa.Table | None) -> pa.Table:
    """``rows`` and the link rows, one table (one append, one commit)."""
    return rows if links is None else pa.concat_tables([rows, links.cast(rows.schema)])
