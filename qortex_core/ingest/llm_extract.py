"""LLM extraction: an :class:`~qortex_core.ingest.extract.Extractor` over any OpenAI-compatible endpoint.

Uses the ``openai`` client with ``instructor`` (tools mode, or JSON mode) and the pydantic
response models of :mod:`qortex_core.ingest.llm_schema`. Two separate retry layers:

- transport retries here: HTTP 429, 408/409, 5xx, timeouts and connection
  errors, with exponential backoff (honouring ``Retry-After``), up to
  ``max_retries``; the openai client's own retries are off so this loop counts;
- validation re-asks inside instructor: an answer that is not valid JSON or
  breaks the schema is sent back with the error, up to ``validation_retries``.

A chunk that still fails becomes an :class:`Extraction` with
``meta={"status": "failed", "error": ...}``; ``index.extract_chunks`` stores it
and retries it on the next run. Successful ones carry ``status: "ok"``.
"""

from __future__ import annotations

import logging
import math
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from qortex_core.errors import ConfigError
from qortex_core.ingest.llm_schema import (
    PROMPT_VERSION,
    PassageExtraction,
    build_messages,
    clean_text,
    to_extraction,
)
from qortex_core.storage.model import Extraction, Passage

ERROR_CAP = 300
_log = logging.getLogger(__name__)
_MODES = {
    "tools": "TOOLS",
    "json": "JSON",
}  # instructor modes: forced tool call, or JSON-object content
_RETRY_STATUS = {408, 409, 429}
_FATAL_STATUS = {401, 403, 404}
_SECRET_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-.~+/*]+=*"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*.]{3,}"),
    re.compile(r"(?i)(api[_-]?key\W{1,3})\S+"),
)


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the LLM. ``api_key`` never shows in ``repr``.

    Prices are USD per 1,000 tokens and only feed the cost estimate
    (0 for local servers; set them for a hosted model).
    """

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 4
    max_retries: int = 4
    validation_retries: int = 2
    timeout_s: float = 60.0
    backoff_base_s: float = 0.5
    max_backoff_s: float = 30.0
    prompt_version: str = PROMPT_VERSION
    price_in_per_1k: float = 0.0
    price_out_per_1k: float = 0.0
    temperature: float = 0.0
    mode: str = "tools"

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise ConfigError("LLM model name is empty: set QORTEX_LLM_MODEL")
        if self.concurrency < 1 or self.max_retries < 0 or self.validation_retries < 0:
            raise ConfigError("LLM concurrency must be >= 1 and retry counts >= 0")
        if self.timeout_s <= 0 or self.backoff_base_s < 0 or self.max_backoff_s < 0:
            raise ConfigError("LLM timeout must be > 0 and backoff times >= 0")
        if self.mode not in _MODES:
            raise ConfigError(f"LLM mode {self.mode!r} is not one of: {', '.join(sorted(_MODES))}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMConfig:
        """Config from ``QORTEX_LLM_*`` environment variables.

        Reads QORTEX_LLM_MODEL (default ``gpt-4o-mini``), QORTEX_LLM_BASE_URL,
        QORTEX_LLM_API_KEY (falling back to OPENAI_API_KEY), and optionally
        QORTEX_LLM_MODE (``tools``, the default, or ``json`` for servers without tool calling),
        QORTEX_LLM_CONCURRENCY, QORTEX_LLM_TIMEOUT_S, QORTEX_LLM_MAX_RETRIES,
        QORTEX_LLM_PRICE_IN_PER_1K and QORTEX_LLM_PRICE_OUT_PER_1K.

        Raises:
            ConfigError: no key and no base URL (nothing to call), or a number does not parse.
        """
        env = os.environ if env is None else env
        base_url = env.get("QORTEX_LLM_BASE_URL") or None
        api_key = env.get("QORTEX_LLM_API_KEY") or env.get("OPENAI_API_KEY") or None
        if api_key is None and base_url is None:
            raise ConfigError(
                "no LLM configured: set QORTEX_LLM_API_KEY (or OPENAI_API_KEY) or QORTEX_LLM_BASE_URL"
            )
        numbers: dict[str, Any] = {}
        for name, attr, kind in (
            ("QORTEX_LLM_CONCURRENCY", "concurrency", int),
            ("QORTEX_LLM_TIMEOUT_S", "timeout_s", float),
            ("QORTEX_LLM_MAX_RETRIES", "max_retries", int),
            ("QORTEX_LLM_PRICE_IN_PER_1K", "price_in_per_1k", float),
            ("QORTEX_LLM_PRICE_OUT_PER_1K", "price_out_per_1k", float),
        ):
            if env.get(name):
                try:
                    numbers[attr] = kind(env[name])
                except ValueError:
                    raise ConfigError(f"{name}={env[name]!r} is not a number") from None
        return cls(
            model=env.get("QORTEX_LLM_MODEL") or "gpt-4o-mini",
            base_url=base_url,
            api_key=api_key,
            mode=env.get("QORTEX_LLM_MODE") or "tools",
            **numbers,
        )


# -- secrets ----------------------------------------------------------------------------
def redact(message: str, secrets: Sequence[str | None] = ()) -> str:
    """``message`` as one capped line with ``secrets`` and key-like tokens masked."""
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        message = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", message)
    return clean_text(message, ERROR_CAP)


class _RedactingFilter(logging.Filter):
    """Masks secrets in records of loggers that print exception text (instructor's retry log).

    instructor logs every failed attempt at ERROR; :class:`LLMExtractor` retries
    and reports those itself, so its retry records are demoted to DEBUG.
    """

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "instructor.v2.retry" and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        if self.secrets:
            message = record.getMessage()
            masked = message
            for secret in self.secrets:
                masked = masked.replace(secret, "***")
            if masked != message:
                record.msg, record.args = masked, None
        return True


_LOG_FILTER = _RedactingFilter()
for _name in (
    "instructor",
    "instructor.v2",
    "instructor.v2.retry",
    "openai",
    "openai._base_client",
):
    logging.getLogger(_name).addFilter(_LOG_FILTER)


# -- accounting ---------------------------------------------------------------------------
class _Tally(threading.local):
    """Per-thread counts for the chunk being extracted on that thread."""

    def __init__(self) -> None:
        self.calls = self.reasks = self.retries = self.prompt_tokens = self.completion_tokens = 0

    def reset(self) -> None:
        self.__init__()


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
        if config.api_key:
            _LOG_FILTER.secrets.add(config.api_key)

    def __repr__(self) -> str:
        return f"LLMExtractor({self.config!r})"

    @property
    def cache_key(self) -> str:
        suffix = "" if self.config.mode == "tools" else f"/{self.config.mode}"
        return f"llm/{self.config.model}/p{self.config.prompt_version}{suffix}"

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
                import instructor
                from openai import OpenAI

                raw = OpenAI(
                    base_url=self.config.base_url,
                    api_key=self.config.api_key or "unused",
                    timeout=self.config.timeout_s,
                    max_retries=0,
                )
                client = instructor.from_openai(
                    raw, mode=getattr(instructor.Mode, _MODES[self.config.mode])
                )
                client.on("completion:kwargs", self._on_request)
                client.on("completion:response", self._on_response)
                client.on("parse:error", self._on_parse_error)
                self._client = client
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
        client = self._instructor()
        for attempt in range(self.config.max_retries + 1):
            try:
                return client.chat.completions.create(
                    model=self.config.model,
                    messages=build_messages(passage),
                    response_model=PassageExtraction,
                    max_retries=self.config.validation_retries,
                    strict=False,
                    temperature=self.config.temperature,
                )
            except Exception as exc:
                cause = _root_cause(exc)
                status = getattr(cause, "status_code", None)
                if status in _FATAL_STATUS:
                    self._fatal = f"skipped after an earlier HTTP {status}: {self._describe(exc)}"
                if attempt == self.config.max_retries or not _retryable(cause):
                    raise
                self._tally.retries += 1
                self._add(retries=1)
                delay = self._delay(attempt, cause)
                _log.debug(
                    "chunk %s: %s, retry %d in %.2fs",
                    passage.id,
                    type(cause).__name__,
                    attempt + 1,
                    delay,
                )
                time.sleep(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, cause: BaseException) -> float:
        """Exponential backoff with jitter, or the server's Retry-After when it asks for longer."""
        backoff = self.config.backoff_base_s * (2**attempt) * (1 + 0.25 * random.random())
        return min(max(backoff, _retry_after(cause)), self.config.max_backoff_s)

    def _describe(self, exc: BaseException) -> str:
        cause = _root_cause(exc)
        if isinstance(exc, _Skipped):
            return redact(str(exc), [self.config.api_key])
        status = getattr(cause, "status_code", None)
        label = f"HTTP {status}" if status else type(cause).__name__
        attempts = f" after {self._tally.calls} request(s)" if self._tally.calls else ""
        return redact(f"{label}{attempts}: {cause}", [self.config.api_key])


class _Skipped(Exception):
    """The endpoint refused an earlier chunk for good (auth, unknown model): no call made."""


def _root_cause(exc: BaseException) -> BaseException:
    """The API or validation error under instructor's retry wrapper."""
    seen = exc
    while seen.__cause__ is not None and type(seen).__name__ == "InstructorRetryException":
        seen = seen.__cause__
    return seen


def _retryable(cause: BaseException) -> bool:
    """Transport trouble worth another try: timeouts, connection errors, 408/409/429, 5xx."""
    import openai

    if isinstance(cause, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    status = getattr(cause, "status_code", None)
    return (
        isinstance(cause, openai.APIStatusError)
        and status is not None
        and (status in _RETRY_STATUS or status >= 500)
    )


def _retry_after(cause: BaseException) -> float:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``retry-after``), else 0."""
    response = getattr(cause, "response", None)
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name, "")) * scale
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and value >= 0:
            return value
    return 0.0
