"""The query path: the retriever, modes (one module each, routing in :mod:`.modes.auto`, the
graph walk in :mod:`.modes.walk`), seeding (:mod:`.seeding`), scoring helpers
(:mod:`.scoring`), PPR (:mod:`.ppr`), fusion, rules, scoring profiles, hit assembly, the fresh
tier (:mod:`.fresh_tier`) and the recognition filter.

Layer: above ``memory`` and ``feedback``. May import ``storage``, ``embed``, ``llm``,
``ingest``, ``memory``, ``feedback``, ``redact``, ``errors``, ``settings``; never ``agent``,
``ops`` or ``serving``.
"""
