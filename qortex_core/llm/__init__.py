"""LLM plumbing shared by extraction and recognition: one client module (:mod:`.client`).

:mod:`qortex_core.llm.client` holds the endpoint config (:class:`~.client.LLMConfig`), the
``openai`` + ``instructor`` client, transport retries with backoff honouring ``Retry-After``,
the retryable/fatal classification, key masking and the log filter that keeps keys out of logs.
Prompts, response models and parsing stay with their users (``ingest.llm_schema``,
``ingest.llm_extract``, ``query.recognition``).

May import: ``errors``, ``settings``, ``redact``. Never ``storage``, ``ingest``, ``query`` or
``memory``.
"""

from qortex_core.llm.client import LLMConfig

__all__ = ["LLMConfig"]
