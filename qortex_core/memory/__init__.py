"""Memory: the agent's write path. Records and their revisions (:mod:`.records`,
:mod:`.revise`), supersession of older statements (:mod:`.supersede`, :mod:`.statements`,
:mod:`.timeline`), the fresh tier's state (:mod:`.fresh`) and consolidation into the ingest
stages (:mod:`.consolidate`).

Layer: above ``ingest`` (consolidation feeds its stages), below ``query`` (the retriever reads
the fresh tier). May import ``storage``, ``embed``, ``llm``, ``ingest``, ``redact``, ``errors``,
``settings``; never ``query``, ``agent`` or ``ops``.
"""
