"""Memory: feedback events, the query log, learned teleportation factors.

(And agent-written records.)

May import: ``storage``, ``embed``, ``redact``, ``errors``, ``settings``. Never imports ``query`` at
module level.
"""
