"""Ingestion: documents, chunking, extraction (offline, recorded, LLM), embedding stages, synonyms,
graph build and the one ``STAGES`` sequence that Dagster assets, the in-process runner and eval
share.

May import: ``storage``, ``llm``, ``embed``, ``redact``, ``errors``, ``settings``. Never imports
``query``.
"""
