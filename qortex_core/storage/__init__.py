"""Storage: the LanceDB store of record, immutable snapshots, ids, the data model, tenants,
retention.

May import: ``qortex_core.errors``, ``qortex_core.settings`` and third-party storage libraries.
The lowest layer: never imports ``embed``, ``llm``, ``ingest``, ``memory``, ``query`` or
``ops``. Also holds format-level helpers every layer reads: Arrow column access
(:mod:`.arrow_access`) and adjacency symmetry checks (:mod:`.symmetry`).
"""
