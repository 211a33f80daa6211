"""What of a snapshot a live passage still backs, once passages are hidden.

Forgetting a memory (or a file passage, or updating a memory past a passage) hides its
passages at once, before any consolidation (:mod:`qortex_core.query.fresh_tier`). Whatever came
only from those passages must go with them: a fact all of whose source passages are hidden
neither links to a query nor names a seed; a concept no live passage contains (nor any live
fact names) is not a seed, a result concept or a rule's reason; a rule all of whose source
passages are hidden is not shown. Each mask is a few vectorised gathers over the snapshot's
CSR arrays, computed once per change of the hidden set, not per query.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qortex_core.query.ppr.csr_views import rows_listing
from qortex_core.query.snapshot_view import SnapshotView


@dataclass(frozen=True)
class Liveness:
    """Masks of what live passages still back (True: may be shown or seeded).

    Attributes:
        passages: (n_passages,) passages not hidden.
        facts: (n_facts,) facts with at least one live source passage.
        phrases: (n_phrases,) concepts a live passage contains or a live fact names.
        rules: (n_rules,) rules with a live source passage (snapshots without rule sources:
            rules linked to a live concept).
    """

    passages: np.ndarray
    facts: np.ndarray
    phrases: np.ndarray
    rules: np.ndarray

    @classmethod
    def of(cls, view: SnapshotView, hidden: np.ndarray) -> Liveness | None:
        """The masks for ``hidden`` (n_passages,) passages; None when none is hidden."""
        if not hidden.any():
            return None
        live = ~np.asarray(hidden, bool)  # (n_passages,)
        facts = rows_listing(*view.fact_passages, live)  # (n_facts,)
        contains = view.passage_phrases()  # (n_passages, n_phrases) CSR
        phrases = np.zeros(view.n_phrases, bool)
        phrases[contains.indices[np.repeat(live, np.diff(contains.indptr))]] = True
        phrases[np.asarray(view.fact_nodes)[facts].reshape(-1)] = True
        return cls(live, facts, phrases, view.rule_index.live(live, phrases))
