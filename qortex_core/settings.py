"""One typed settings object, read from the environment once and validated before any work.

Every documented ``QORTEX_*`` variable (and ``OPENAI_API_KEY``, ``DAGSTER_HOME``) is a field of
:class:`Settings`; an empty variable counts as unset. :func:`get_settings` parses the process
environment (or a mapping, for tests and :func:`pipelines.definitions.build_definitions`) and
caches the result per distinct set of values, so a process reads its configuration once. A bad
value raises :class:`~qortex_core.errors.ConfigError` with one line naming the variable, e.g.
``QORTEX_EXTRACTOR='ofline' is not one of: auto, llm, offline, recorded``.

May import: ``errors``. Imported by every other package.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Annotated, Any, Literal, Mapping

from pydantic import BeforeValidator, Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from qortex_core.errors import ConfigError

EXTRACTORS = ("auto", "llm", "offline", "recorded")
EXECUTORS = ("in_process", "multiprocess", "dask")
LLM_MODES = ("tools", "json")
EMBED_DEVICES = ("auto", "cpu", "cuda")
SWITCHES = ("on", "off")
DEFAULT_CRON = "0 3 * * *"


def _positive_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    text = str(value).strip()
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ValueError("must be a positive integer")
    return int(text)


def _number(kind: type) -> BeforeValidator:
    def parse(value: Any) -> Any:
        if value is None or isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        try:
            return kind(str(value).strip())
        except ValueError:
            raise ValueError("is not a number") from None

    return BeforeValidator(parse)


def _one_of(choices: tuple[str, ...]) -> BeforeValidator:
    def check(value: Any) -> Any:
        if value is not None and value not in choices:
            raise ValueError(f"is not one of: {', '.join(choices)}")
        return value

    return BeforeValidator(check)


MAX_SHARDS = 256  # three assets a shard: 2,000 shards took 15 s to load the definitions


def _shard_count(value: Any) -> int:
    count = _positive_int(value)
    if count > MAX_SHARDS:
        raise ValueError(f"must be a positive integer up to {MAX_SHARDS}")
    return count


PositiveInt = Annotated[int, BeforeValidator(_positive_int)]
ShardCount = Annotated[int, BeforeValidator(_shard_count)]
OptInt = Annotated[int | None, _number(int)]
OptFloat = Annotated[float | None, _number(float)]
Switch = Annotated[Literal["on", "off"] | None, _one_of(SWITCHES)]


def _env(name: str, **kwargs: Any) -> Any:
    """A field read from the variable ``name``."""
    return Field(validation_alias=name, **kwargs)


class Settings(BaseSettings):
    """Every configuration variable, typed. Secrets are left out of ``repr``."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="ignore",
        case_sensitive=True,
        env_ignore_empty=True,
        validate_default=False,
    )

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, **sources):  # type: ignore[no-untyped-def, override]
        """Only the values given: :func:`get_settings` reads the environment (or the mapping it
        is handed) itself, and its cache is keyed by those values alone, so a mapping must
        not be merged with the process environment behind its back."""
        return (init_settings,)

    # data home and sources
    home: str = _env("QORTEX_HOME", default="")
    snapshot_home: str = _env("QORTEX_SNAPSHOT_HOME", default="")
    source_dir: str = _env("QORTEX_SOURCE_DIR", default="")
    domain: str = _env("QORTEX_DOMAIN", default="")
    dagster_home: str = _env("DAGSTER_HOME", default="")
    # ingestion
    extractor: Annotated[str, _one_of(EXTRACTORS)] = _env("QORTEX_EXTRACTOR", default="auto")
    openie: str = _env("QORTEX_OPENIE", default="")
    embedder: str = _env("QORTEX_EMBEDDER", default="")
    embed_base_url: str = _env("QORTEX_EMBED_BASE_URL", default="")
    embed_api_key: str = _env("QORTEX_EMBED_API_KEY", default="", repr=False)
    embed_device: Annotated[str, _one_of(EMBED_DEVICES)] = _env(
        "QORTEX_EMBED_DEVICE", default="auto"
    )
    # Dagster
    executor: Annotated[str, _one_of(EXECUTORS)] = _env("QORTEX_EXECUTOR", default="in_process")
    max_concurrent: PositiveInt = _env("QORTEX_MAX_CONCURRENT", default=2)
    dask_address: str = _env("QORTEX_DASK_ADDRESS", default="")  # empty: a LocalCluster per run
    shards: ShardCount = _env("QORTEX_SHARDS", default=1)  # chunks/extractions/embeddings shards
    ingest_cron: str = _env("QORTEX_INGEST_CRON", default=DEFAULT_CRON)
    ingest_timezone: str = _env("QORTEX_INGEST_TIMEZONE", default="UTC")
    schedule: Switch = _env("QORTEX_SCHEDULE", default=None)
    sensor: Switch = _env("QORTEX_SENSOR", default=None)
    sensor_interval_s: PositiveInt = _env("QORTEX_SENSOR_INTERVAL_S", default=60)
    feedback_sensor: Switch = _env("QORTEX_FEEDBACK_SENSOR", default=None)
    feedback_sensor_interval_s: PositiveInt = _env("QORTEX_FEEDBACK_SENSOR_INTERVAL_S", default=30)
    memory_sensor: Switch = _env("QORTEX_MEMORY_SENSOR", default=None)
    memory_sensor_interval_s: PositiveInt = _env("QORTEX_MEMORY_SENSOR_INTERVAL_S", default=30)
    # extraction failure budget (qortex_core/ingest/budget.py)
    max_failed_share: Annotated[float, _number(float)] = _env(
        "QORTEX_MAX_FAILED_SHARE", default=0.05
    )
    allow_permanent_failures: Switch = _env("QORTEX_ALLOW_PERMANENT_FAILURES", default=None)
    # retention
    snapshot_keep: PositiveInt = _env("QORTEX_SNAPSHOT_KEEP", default=5)
    query_log_days: PositiveInt = _env("QORTEX_QUERY_LOG_DAYS", default=30)
    # LLM extraction
    llm_model: str = _env("QORTEX_LLM_MODEL", default="")
    llm_base_url: str = _env("QORTEX_LLM_BASE_URL", default="")
    llm_api_key: str = _env("QORTEX_LLM_API_KEY", default="", repr=False)
    openai_api_key: str = _env("OPENAI_API_KEY", default="", repr=False)
    llm_mode: Annotated[str, _one_of(LLM_MODES)] = _env("QORTEX_LLM_MODE", default="tools")
    llm_concurrency: OptInt = _env("QORTEX_LLM_CONCURRENCY", default=None)
    llm_timeout_s: OptFloat = _env("QORTEX_LLM_TIMEOUT_S", default=None)
    llm_max_retries: OptInt = _env("QORTEX_LLM_MAX_RETRIES", default=None)
    llm_price_in_per_1k: OptFloat = _env("QORTEX_LLM_PRICE_IN_PER_1K", default=None)
    llm_price_out_per_1k: OptFloat = _env("QORTEX_LLM_PRICE_OUT_PER_1K", default=None)
    # recognition filter (falls back to the LLM extraction endpoint)
    recognition_model: str = _env("QORTEX_RECOGNITION_MODEL", default="")
    recognition_base_url: str = _env("QORTEX_RECOGNITION_BASE_URL", default="")
    recognition_api_key: str = _env("QORTEX_RECOGNITION_API_KEY", default="", repr=False)
    recognition_mode: Annotated[str, _one_of(LLM_MODES)] = _env(
        "QORTEX_RECOGNITION_MODE", default=""
    )
    recognition_timeout_s: Annotated[float, _number(float)] = _env(
        "QORTEX_RECOGNITION_TIMEOUT_S", default=10.0
    )
    recognition_max_retries: Annotated[int, _number(int)] = _env(
        "QORTEX_RECOGNITION_MAX_RETRIES", default=2
    )
    recognition_candidates: Annotated[int, _number(int)] = _env(
        "QORTEX_RECOGNITION_CANDIDATES", default=5
    )

    def provided(self, variable: str) -> bool:
        """Whether the environment set ``variable`` (non-empty)."""
        return _FIELD_OF.get(variable, "") in self.model_fields_set

    # -- derived values (the fallbacks the README documents) ------------------------------
    @property
    def llm_key(self) -> str | None:
        """QORTEX_LLM_API_KEY, else OPENAI_API_KEY, else None."""
        return self.llm_api_key or self.openai_api_key or None

    def llm_numbers(self) -> dict[str, Any]:
        """The numeric LLM settings that were set, by :class:`~qortex_core.llm.LLMConfig` field."""
        numbers = {
            "concurrency": self.llm_concurrency,
            "timeout_s": self.llm_timeout_s,
            "max_retries": self.llm_max_retries,
            "price_in_per_1k": self.llm_price_in_per_1k,
            "price_out_per_1k": self.llm_price_out_per_1k,
        }
        return {k: v for k, v in numbers.items() if v is not None}

    @property
    def recognition_key(self) -> str | None:
        """QORTEX_RECOGNITION_API_KEY, else the LLM extraction key."""
        return self.recognition_api_key or self.llm_key


_FIELD_OF = {
    str(info.validation_alias): name
    for name, info in Settings.model_fields.items()
    if info.validation_alias
}
VARIABLES = tuple(_FIELD_OF)


def _message(exc: ValidationError) -> str:
    """One line naming the first bad variable, its value and what is wrong."""
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "configuration"
    reason = error.get("ctx", {}).get("error") if error["type"] == "value_error" else None
    return f"{name}={error['input']!r} {reason or error['msg']}"


@functools.lru_cache(maxsize=32)
def _parse(values: tuple[tuple[str, str], ...]) -> Settings:
    try:
        return Settings.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(_message(exc)) from None


def get_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``env`` (default: the process environment), parsed once per distinct value.

    Raises:
        ConfigError: a variable has a bad value (one line naming it).
    """
    source = os.environ if env is None else env
    return _parse(tuple(sorted((k, source[k]) for k in VARIABLES if source.get(k))))
