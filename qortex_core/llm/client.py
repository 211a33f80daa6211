"""One LLM client for every caller: config, the instructor client, retries, key masking.

Two separate retry layers, as before the split:

- transport retries here (:func:`create_with_retries`): HTTP 429, 408/409, 5xx, timeouts and
  connection errors, with exponential backoff (honouring ``Retry-After``), up to
  ``max_retries``; the openai client's own retries are off so this loop counts;
- validation re-asks inside instructor: an answer that is not valid JSON or breaks the
  response model is sent back with the error, up to ``validation_retries``.

API keys never reach a stored error or a log line: :func:`mask_secrets` masks them (and
key-like tokens) in messages, and :data:`LOG_FILTER` masks registered keys in the records of
the ``openai`` and ``instructor`` loggers.
"""

from __future__ import annotations

import logging
import math
import random
import re
import time
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from qortex_core.errors import ConfigError
from qortex_core.redact import redact

if TYPE_CHECKING:
    from qortex_core.settings import Settings

ERROR_CAP = 300
MODES = {"tools": "TOOLS", "json": "JSON"}  # instructor modes: forced tool call, or JSON content
RETRY_STATUS = frozenset({408, 409, 429})
FATAL_STATUS = frozenset({401, 403, 404})
_SECRET_PATTERNS = (
    re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]{0,30}://)[^\s/@\"'<>]{1,256}(?=@)"),  # URL userinfo
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9_\-.~+/*]+=*"),
    re.compile(r"\bsk-[A-Za-z0-9_\-*.]{3,}"),
    re.compile(r"(?i)(api[_-]?key\W{1,3})\S+"),
)
_log = logging.getLogger(__name__)


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
    prompt_version: str = ""  # empty: the caller's own prompt version
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
        if self.mode not in MODES:
            raise ConfigError(f"LLM mode {self.mode!r} is not one of: {', '.join(sorted(MODES))}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMConfig:
        """Config from the ``QORTEX_LLM_*`` settings (see :class:`qortex_core.settings.Settings`).

        Reads QORTEX_LLM_MODEL (default ``gpt-4o-mini``), QORTEX_LLM_BASE_URL,
        QORTEX_LLM_API_KEY (falling back to OPENAI_API_KEY), and optionally
        QORTEX_LLM_MODE (``tools``, the default, or ``json`` for servers without tool calling),
        QORTEX_LLM_CONCURRENCY, QORTEX_LLM_TIMEOUT_S, QORTEX_LLM_MAX_RETRIES,
        QORTEX_LLM_PRICE_IN_PER_1K and QORTEX_LLM_PRICE_OUT_PER_1K.

        Args:
            env: a mapping to read instead of the process environment (tests).

        Raises:
            ConfigError: no key and no base URL (nothing to call), or a number does not parse.
        """
        from qortex_core.settings import get_settings

        return cls.from_settings(get_settings(env))

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMConfig:
        """Config from a :class:`~qortex_core.settings.Settings` (see :meth:`from_env`).

        Raises:
            ConfigError: no key and no base URL (nothing to call).
        """
        if settings.llm_key is None and not settings.llm_base_url:
            raise ConfigError(
                "no LLM configured: set QORTEX_LLM_API_KEY (or OPENAI_API_KEY) or "
                "QORTEX_LLM_BASE_URL"
            )
        return cls(
            model=settings.llm_model or "gpt-4o-mini",
            base_url=settings.llm_base_url or None,
            api_key=settings.llm_key,
            mode=settings.llm_mode,
            **settings.llm_numbers(),
        )


# -- secrets ----------------------------------------------------------------------------
def clean_text(value: object, cap: int) -> str:
    """One line of printable text: control/format characters become spaces, capped at ``cap``."""
    text = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in str(value))
    return " ".join(text.split())[:cap].strip()


def mask_secrets(message: str, secrets: Sequence[str | None] = ()) -> str:
    """``message`` as one capped line with ``secrets`` and key-like tokens masked.

    Not to be confused with :func:`qortex_core.redact.redact_secrets`, which removes secrets
    from source documents as they are read.
    """
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    for pattern in _SECRET_PATTERNS:
        message = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", message)
    return clean_text(message, ERROR_CAP)


class SecretLogFilter(logging.Filter):
    """Masks secrets in records of loggers that print exception text (instructor's retry log).

    instructor logs every failed attempt at ERROR; the callers here retry and report those
    themselves, so its retry records are demoted to DEBUG.
    """

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "instructor.v2.retry" and record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        message = record.getMessage()
        masked = self._mask(message)  # URL userinfo, bearer tokens, keys, every redact format
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:  # a traceback quotes the URL
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text, record.exc_info = self._mask(text), None
        elif record.exc_text:
            record.exc_text = self._mask(record.exc_text)
        return True

    def _mask(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        for pattern in _SECRET_PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
        return redact(text)


LOG_FILTER = SecretLogFilter()
_LOGGERS = (
    "instructor",
    "instructor.v2",
    "instructor.v2.retry",
    "openai",
    "openai._base_client",
    "httpx",  # "HTTP Request: POST http://user:pw@host/v1/embeddings" at INFO
    "httpx2",  # openai 3.x's transport
    *(f"{p}.{c}" for p in ("httpcore", "httpcore2") for c in ("connection", "http11", "http2")),
)
for _name in _LOGGERS:
    logging.getLogger(_name).addFilter(LOG_FILTER)


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` in every later record of the openai and instructor loggers."""
    if secret:
        LOG_FILTER.secrets.add(secret)


# -- errors -----------------------------------------------------------------------------
def root_cause(exc: BaseException) -> BaseException:
    """The API or validation error under instructor's retry wrapper."""
    seen = exc
    while seen.__cause__ is not None and type(seen).__name__ == "InstructorRetryException":
        seen = seen.__cause__
    return seen


def status_of(cause: BaseException) -> int | None:
    """The HTTP status of an API error, else None."""
    return getattr(cause, "status_code", None)


def is_retryable(cause: BaseException) -> bool:
    """Transport trouble worth another try: timeouts, connection errors, 408/409/429, 5xx."""
    import openai

    if isinstance(cause, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    status = status_of(cause)
    return (
        isinstance(cause, openai.APIStatusError)
        and status is not None
        and (status in RETRY_STATUS or status >= 500)
    )


def retry_after(cause: BaseException) -> float:
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


def backoff_delay(config: LLMConfig, attempt: int, cause: BaseException) -> float:
    """Exponential backoff with jitter, or the server's Retry-After when it asks for longer."""
    backoff = config.backoff_base_s * (2**attempt) * (1 + 0.25 * random.random())
    return min(max(backoff, retry_after(cause)), config.max_backoff_s)


def describe_failure(cause: BaseException, requests: int, api_key: str | None) -> str:
    """One masked line: ``HTTP 503 after 3 request(s): ...`` (the count only when > 0)."""
    status = status_of(cause)
    label = f"HTTP {status}" if status else type(cause).__name__
    attempts = f" after {requests} request(s)" if requests else ""
    return mask_secrets(f"{label}{attempts}: {cause}", [api_key])


# -- the client -------------------------------------------------------------------------
def instructor_client(config: LLMConfig, hooks: Mapping[str, Callable[..., None]]) -> Any:
    """An instructor client over ``openai.OpenAI`` (no own retries) with ``hooks`` attached.

    Args:
        config: endpoint, key, timeout and instructor mode.
        hooks: instructor event name (``completion:kwargs``, ``completion:response``,
            ``parse:error``) -> handler.
    """
    import instructor
    from openai import OpenAI

    raw = OpenAI(
        base_url=config.base_url,
        api_key=config.api_key or "unused",
        timeout=config.timeout_s,
        max_retries=0,
    )
    client = instructor.from_openai(raw, mode=getattr(instructor.Mode, MODES[config.mode]))
    for event, handler in hooks.items():
        client.on(event, handler)  # type: ignore[arg-type]  # instructor types events as Literal
    return client


def create_with_retries(
    client: Any,
    config: LLMConfig,
    messages: list[dict[str, str]],
    response_model: type,
    label: str,
    on_retry: Callable[[], None] | None = None,
) -> Any:
    """``response_model`` from the endpoint, retrying transport trouble with backoff.

    Args:
        client: from :func:`instructor_client`.
        config: model, retry counts, backoff and temperature.
        messages: the chat messages.
        response_model: the pydantic model instructor validates the answer against.
        label: names the request in debug logs (``chunk p_...``, ``recognition``).
        on_retry: called once before each transport retry (counters).

    Raises:
        Exception: the last error (instructor's wrapper or the API error) once retries are spent
            or the error is not retryable; use :func:`root_cause` to classify it.
    """
    for attempt in range(config.max_retries + 1):
        try:
            return client.chat.completions.create(
                model=config.model,
                messages=messages,
                response_model=response_model,
                max_retries=config.validation_retries,
                strict=False,
                temperature=config.temperature,
            )
        except Exception as exc:
            cause = root_cause(exc)
            if attempt == config.max_retries or not is_retryable(cause):
                raise
            if on_retry is not None:
                on_retry()
            delay = backoff_delay(config, attempt, cause)
            _log.debug("%s: %s, retry %d in %.2fs", label, type(cause).__name__, attempt + 1, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")
