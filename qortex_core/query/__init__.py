"""The query path: retriever, modes (one module each, :mod:`.modes`), seeding, PPR, fusion,
rules, scoring profiles, hit assembly and the recognition filter.

May import: ``storage``, ``memory``, ``llm``, ``embed``, ``redact``, ``errors``, ``settings``.
Never imports ``ingest``.
"""
