"""Storage: the LanceDB store of record, immutable snapshots, ids, the data model, tenants,
retention.

May import: ``qortex_core.errors``, ``qortex_core.settings`` and third-party storage libraries.
Never imports ``ingest``, ``query``, ``memory`` or ``ops``.
"""
