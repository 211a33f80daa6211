"""The agent's API: :class:`~.api.Memory` (remember, update, forget, search, feedback) and its
async twin (:mod:`.aio`), the search that merges the snapshot with the fresh tier
(:mod:`.search`), what is true now (:mod:`.current`) and the graph methods (:mod:`.graph_methods`).

Layer: above ``query``. May import ``storage``, ``embed``, ``llm``, ``ingest``, ``memory``,
``feedback`` and ``query``; never ``ops`` or ``serving``.
"""
