"""LLM extraction: an :class:`~qortex_core.ingest.extract.Extractor` over an OpenAI-compatible API.

Uses the one LLM client of :mod:`qortex_core.llm.client` (instructor in tools or JSON mode,
transport retries with backoff, key masking) with the pydantic response models and prompt of
:mod:`qortex_core.ingest.llm_schema`. Validation re-asks happen inside instructor.

A chunk that still fails becomes an :class:`Extraction` with
``meta={"status": "failed", "error": ...}``; ``stages.extract_chunks`` stores it
and retries it on the next run. Successful ones carry ``status: "ok"``.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from qortex_core.ingest.llm_schema import (
    PROMPT_VERSION,
    PassageExtraction,
    build_messages,
    to_extraction,
)
from qortex_core.llm.client import (
    FATAL_STATUS,
    LLMConfig,
    create_with_retries,
    describe_failure,
    instructor_client,
    mask_secrets,
    register_secret,
    root_cause,
    status_of,
)
from qortex_core.storage.model import Extraction, Passage

__all__ = ["LLMConfig", "LLMExtractor"]

_log = logging.getLogger(__name__)


# -- accounting ---------------------------------------------------------------------------
class _Tally(threading.local):
    """Per-thread counts for the chunk being extracted on that thread."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.calls = self.reasks = self.retries = self.prompt_tokens = self.completion_tokens = 0


_COUNTERS = ("calls", "prompt_tokens", "completion_tokens", "retries", "reasks", "failures")


class _Counter:
    """A read-only, lock-protected counter attribute of :class:`LLMExtractor`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with obj._lock:
            return obj._counts[self.name]


class LLMExtractor:
    """Concepts, typed relations and rules from an OpenAI-compatible chat endpoint.

    Counters (thread-safe, cumulative over the instance's life): ``calls`` (HTTP
    requests sent), ``prompt_tokens``, ``completion_tokens``, ``cost_usd``,
    ``retries`` (transport retries), ``reasks`` (validation re-asks) and
    ``failures`` (chunks that ended failed).
    """

    calls = _Counter()
    prompt_tokens = _Counter()
    completion_tokens = _Counter()
    retries = _Counter()
    reasks = _Counter()
    failures = _Counter()

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._cost = 0.0
        self._tally = _Tally()
        self._client: Any = None
        self._fatal: str | None = None
        register_secret(config.api_key)

    def __repr__(self) -> str:
        return f"LLMExtractor({self.config!r})"

    @property
    def cache_key(self) -> str:
        suffix = "" if self.config.mode == "tools" else f"/{self.config.mode}"
        version = self.config.prompt_version or PROMPT_VERSION
        return f"llm/{self.config.model}/p{version}{suffix}"

    @property
    def cost_usd(self) -> float:
        with self._lock:
            return self._cost

    def usage(self) -> dict[str, float]:
        """A snapshot of every counter, for run metadata."""
        with self._lock:
            return {**self._counts, "cost_usd": round(self._cost, 6)}

    def _add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                self._counts[name] += n

    # -- client and hooks -------------------------------------------------------------------
    def _instructor(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = instructor_client(
                    self.config,
                    {
                        "completion:kwargs": self._on_request,
                        "completion:response": self._on_response,
                        "parse:error": self._on_parse_error,
                    },
                )
            return self._client

    def _on_request(self, *args: Any, **kwargs: Any) -> None:
        self._tally.calls += 1
        self._add(calls=1)

    def _on_response(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        p = int(getattr(usage, "prompt_tokens", 0) or 0)
        c = int(getattr(usage, "completion_tokens", 0) or 0)
        self._tally.prompt_tokens += p
        self._tally.completion_tokens += c
        with self._lock:
            self._counts["prompt_tokens"] += p
            self._counts["completion_tokens"] += c
            self._cost += (
                p / 1000 * self.config.price_in_per_1k + c / 1000 * self.config.price_out_per_1k
            )

    def _on_parse_error(self, error: Exception, **kwargs: Any) -> None:
        if not kwargs.get("is_last_attempt", False):
            self._tally.reasks += 1
            self._add(reasks=1)

    # -- extraction -------------------------------------------------------------------------
    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        """One Extraction per passage, in order; up to ``concurrency`` requests in flight."""
        if not passages:
            return []
        self._fatal = None
        self._instructor()
        workers = min(self.config.concurrency, len(passages))
        if workers == 1:
            return [self._one(p) for p in passages]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qortex-llm") as pool:
            return list(pool.map(self._one, passages))

    def _one(self, passage: Passage) -> Extraction:
        self._tally.reset()
        try:
            if self._fatal is not None:
                raise _Skipped(self._fatal)
            answer = self._ask(passage)
            out = to_extraction(passage, answer, self.cache_key)
        except Exception as exc:  # every failure becomes a recorded, retryable chunk
            self._add(failures=1)
            error = self._describe(exc)
            _log.warning(
                "LLM extraction of chunk %s failed (retried on the next run): %s", passage.id, error
            )
            out = Extraction(
                passage.id, extractor=self.cache_key, meta={"status": "failed", "error": error}
            )
        out.meta.update(
            http_calls=self._tally.calls,
            retries=self._tally.retries,
            reasks=self._tally.reasks,
            prompt_tokens=self._tally.prompt_tokens,
            completion_tokens=self._tally.completion_tokens,
        )
        return out

    def _ask(self, passage: Passage) -> PassageExtraction:
        try:
            return create_with_retries(
                self._instructor(),
                self.config,
                build_messages(passage),
                PassageExtraction,
                label=f"chunk {passage.id}",
                on_retry=self._on_retry,
            )
        except Exception as exc:
            status = status_of(root_cause(exc))
            if status in FATAL_STATUS:
                self._fatal = f"skipped after an earlier HTTP {status}: {self._describe(exc)}"
            raise

    def _on_retry(self) -> None:
        self._tally.retries += 1
        self._add(retries=1)

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, _Skipped):
            return mask_secrets(str(exc), [self.config.api_key])
        return describe_failure(root_cause(exc), self._tally.calls, self.config.api_key)


class _Skipped(Exception):
    """The endpoint refused an earlier chunk for good (auth, unknown model): no call made."""
