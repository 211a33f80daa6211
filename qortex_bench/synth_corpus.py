"""A synthetic corpus with realistic text statistics, for the scale ladder (``qortex bench scale``).

Words follow a Zipf law over a finite vocabulary (a few real function words at the top ranks,
then made-up lower-case words); every passage is about one named entity (its title) and mentions
others drawn from a Zipf popularity over an entity pool that grows with the corpus, so popular
entities are shared by many passages and the graph is connected like a real one (a giant
component with hubs, a long tail of rare names). Entity names are capitalised made-up words, so
the offline extractor finds them the way it finds names in real text; a few sentences carry an
advice cue and become rules.

Passage ``i`` is a pure function of (config, i): any slice can be generated on its own, and the
queries are built from the entities of sampled passages.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from qortex_core.errors import ConfigError
from qortex_core.storage.model import Passage

_FUNCTION_WORDS = (
    "the of and in to a was is for on by with as at from that which his her it were "
    "an be this are had not but also after its their first into new other two one"
).split()
_SYLLABLES = (
    "ba be bi bo bu da de di do du fa fe fi fo ga ge gi go ka ke ki ko ku la le li lo lu ma me "
    "mi mo mu na ne ni no nu pa pe pi po ra re ri ro ru sa se si so su ta te ti to tu va ve vi "
    "vo za ze zi zo"
).split()
_NAME_SYLLABLES = (
    "kal or ven dra mis tor bel an gar eth ul sor nim rath quel ost ira dun vel cas hal ber"
).split()
_STARTERS = ("The", "In", "After", "During", "However", "Later")
_QUALIFIERS = ("Company", "River", "Festival", "Station", "Society", "Museum", "Trust", "Park")


def _spell(rank: int, syllables: list[str], min_syllables: int) -> str:
    """A distinct made-up word for each rank (base-len(syllables) digits)."""
    parts: list[str] = []
    n = rank
    while n or len(parts) < min_syllables:
        n, digit = divmod(n, len(syllables))
        parts.append(syllables[digit])
    return "".join(parts)


@dataclass(frozen=True)
class SynthConfig:
    """Shape of the synthetic corpus.

    Attributes:
        passages: number of passages.
        seed: master seed; passage i uses the generator seeded with (seed, i).
        vocabulary: distinct lower-case words.
        word_zipf: Zipf exponent of word ranks (English text: about 1.0-1.1).
        entities_per_passage: entity pool size as a multiple of ``passages``.
        entity_zipf: Zipf exponent of entity popularity.
        sentences: inclusive range of sentences per passage.
        words: inclusive range of lower-case words per sentence.
        mentions: inclusive range of entity mentions per sentence.
        rule_rate: share of sentences with an advice cue (they become rules).
        variant_rate: share of mentions that add the entity's qualifier ("Anan Dunbermis
            Company"), a second name of the same entity as real corpora have them (the synonym
            edges' source: with the hashing embedder only shared words make close vectors).
    """

    passages: int
    seed: int = 0
    vocabulary: int = 50_000
    word_zipf: float = 1.07
    entities_per_passage: float = 8.0
    entity_zipf: float = 0.7
    sentences: tuple[int, int] = (3, 6)
    words: tuple[int, int] = (6, 14)
    mentions: tuple[int, int] = (1, 3)
    rule_rate: float = 0.03
    variant_rate: float = 0.2

    def __post_init__(self) -> None:
        if self.passages < 1:
            raise ConfigError(f"a synthetic corpus needs at least 1 passage, got {self.passages}")
        if self.vocabulary < len(_FUNCTION_WORDS) + 1:
            raise ConfigError(f"vocabulary must exceed {len(_FUNCTION_WORDS)} words")


def _zipf_cdf(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent  # (n,)
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


class SynthCorpus:
    """Generates the passages (and queries) of one :class:`SynthConfig`."""

    def __init__(self, config: SynthConfig) -> None:
        self.config = config
        self.n_entities = max(16, int(config.passages * config.entities_per_passage))

    @cached_property
    def _vocab(self) -> np.ndarray:
        made = [
            _spell(r, _SYLLABLES, 2) for r in range(self.config.vocabulary - len(_FUNCTION_WORDS))
        ]
        return np.array(_FUNCTION_WORDS + made, dtype=object)  # (vocabulary,)

    @cached_property
    def _word_cdf(self) -> np.ndarray:
        return _zipf_cdf(self.config.vocabulary, self.config.word_zipf)

    @cached_property
    def _entity_cdf(self) -> np.ndarray:
        return _zipf_cdf(self.n_entities, self.config.entity_zipf)

    def entity_name(self, rank: int) -> str:
        """The name of entity ``rank`` (0 = most popular): two capitalised made-up words."""
        first = _spell((rank * 7919) % 4096, _NAME_SYLLABLES, 2).capitalize()
        return f"{first} {_spell(rank, _NAME_SYLLABLES, 1).capitalize()}"

    def _title_entity(self, i: int) -> int:
        # passages cover the pool in a scattered order; later passages revisit entities
        return (i * 2654435761) % self.n_entities

    def mention(self, rank: int, variant: bool) -> str:
        """How entity ``rank`` is named: its name, or its name and its qualifier."""
        name = self.entity_name(rank)
        return f"{name} {_QUALIFIERS[rank % len(_QUALIFIERS)]}" if variant else name

    def _entities(
        self, i: int
    ) -> tuple[int, list[list[int]], list[np.ndarray], list[bool], list[list[bool]]]:
        """Passage i's title entity, mentions per sentence, word ranks per sentence, rule flags,
        variant flags per mention."""
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, i])
        n_sent = int(rng.integers(cfg.sentences[0], cfg.sentences[1] + 1))
        n_words = rng.integers(cfg.words[0], cfg.words[1] + 1, size=n_sent)  # (sentences,)
        n_ment = rng.integers(cfg.mentions[0], cfg.mentions[1] + 1, size=n_sent)  # (sentences,)
        words = np.searchsorted(self._word_cdf, rng.random(int(n_words.sum())))  # (words,)
        ents = np.searchsorted(self._entity_cdf, rng.random(int(n_ment.sum())))  # (mentions,)
        rules = (rng.random(n_sent) < cfg.rule_rate).tolist()
        variant = (rng.random(len(ents)) < cfg.variant_rate).tolist()  # (mentions,)
        w_at = np.concatenate([[0], np.cumsum(n_words)])
        e_at = np.concatenate([[0], np.cumsum(n_ment)])
        mentions = [ents[e_at[s] : e_at[s + 1]].tolist() for s in range(n_sent)]
        ranks = [words[w_at[s] : w_at[s + 1]] for s in range(n_sent)]
        variants = [variant[e_at[s] : e_at[s + 1]] for s in range(n_sent)]
        return self._title_entity(i), mentions, ranks, rules, variants

    def passage(self, i: int) -> Passage:
        """Passage ``i``: sentences interleaving its entities with Zipf-distributed words."""
        title_rank, mentions, ranks, rules, variants = self._entities(i)
        title = self.entity_name(title_rank)
        sentences = []
        for s, (ments, words) in enumerate(zip(mentions, ranks)):
            names = [self.mention(e, v) for e, v in zip(ments, variants[s])]
            lead = title if s == 0 else _STARTERS[(i + s) % len(_STARTERS)]
            cue = ["should"] if rules[s] else []
            gaps = np.array_split(self._vocab[words], len(names))  # words between the mentions
            body = [" ".join(cue + list(gaps[0]))]
            for name, gap in zip(names, gaps[1:] + [np.array([], dtype=object)]):
                body.append(name)
                if len(gap):
                    body.append(" ".join(gap))
            sentences.append(f"{lead} {' '.join(body)}.")
        return Passage(text=" ".join(sentences), title=title, doc_id=f"synth/{i}", domain="synth")

    def passages(self, start: int = 0, stop: int | None = None) -> list[Passage]:
        """Passages ``start`` .. ``stop - 1`` (default: all)."""
        stop = self.config.passages if stop is None else min(stop, self.config.passages)
        return [self.passage(i) for i in range(start, stop)]

    def queries(self, count: int, seed: int = 1) -> list[str]:
        """Questions naming two entities of one sampled passage (a two-hop shape)."""
        rng = np.random.default_rng([self.config.seed, seed, count])
        out = []
        for i in rng.integers(0, self.config.passages, size=count).tolist():
            title_rank, mentions, _, _, _ = self._entities(i)
            other = [e for sent in mentions for e in sent if e != title_rank]
            named = self.entity_name(other[-1]) if other else "the river"
            out.append(f"What connects {self.entity_name(title_rank)} with {named}?")
        return out
