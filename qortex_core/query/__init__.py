"""The query path: the retriever, seeding, PPR, fusion, rules, scoring profiles and the recognition filter.

May import: ``storage``, ``memory``, ``llm``, ``embed``, ``redact``, ``errors``, ``settings``.
Never imports ``ingest``.
"""
