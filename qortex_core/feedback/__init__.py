"""Feedback: judgement events and the query log (:mod:`.events`), per-concept teleportation
factors folded from them (:mod:`.factors`), and what a retriever keeps of both beside its
snapshot (:mod:`.learned`: factors as a vector over phrase nodes, salience, preference).

Layer: with ``memory``, below ``query``. May import ``storage``, ``errors``, ``settings``; never
``query``, ``agent`` or ``ops``.
"""
