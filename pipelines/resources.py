"""Dagster resources: the data home (store), the source directory, the embedder and the extractor.

Which embedder and extractor run is decided in functions from configuration
(:func:`make_extractor`, :func:`build_resources`), never at import. Secrets and
endpoints come from the environment through Dagster ``EnvVar``, so they are
resolved in the run process and never stored in run config.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from dagster import ConfigurableResource, EnvVar
from pydantic import PrivateAttr

from qortex_core.embed import Embedder, OpenAIEmbedder, OpenAIEmbedderConfig, make_embedder
from qortex_core.errors import ConfigError
from qortex_core.ingest.documents import SourceConfig
from qortex_core.ingest.extract import Extractor, OfflineExtractor, RecordedExtractor
from qortex_core.settings import EXTRACTORS, Settings, get_settings
from qortex_core.storage.store import LanceStore, StoreConfig, is_uri

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "docs"

_embedders: dict[tuple[str, str], Embedder] = {}
_embedders_lock = threading.Lock()


def shared_embedder(spec: str, base_url: str = "", api_key: str = "") -> Embedder:
    """One embedder per (spec, endpoint) per process, so a model loads once however many runs use
    it."""
    with _embedders_lock:
        key = (spec, base_url)
        if key not in _embedders:
            if spec.startswith("openai:"):
                _embedders[key] = OpenAIEmbedder(
                    OpenAIEmbedderConfig(
                        model=spec[7:], base_url=base_url or None, api_key=api_key or None
                    )
                )
            else:
                _embedders[key] = make_embedder(spec)
        return _embedders[key]


class StoreResource(ConfigurableResource):
    """The data home: LanceDB tables (a local folder or an object-store URI) and the snapshot
    folder.

    Attributes:
        home: local path or URI (``s3://``, ``gs://``, ``az://``) of the data home.
        snapshot_home: where snapshots are published; empty: ``home`` (must then be a local path).
    """

    home: str
    snapshot_home: str = ""

    def open(self) -> LanceStore:
        """Open the LanceDB store under the data home."""
        home = self.home if is_uri(self.home) else str(Path(self.home).expanduser())
        # type: ignore[arg-type]  # a URI must stay a string
        return LanceStore(StoreConfig(home=home))

    def snapshots(self) -> Path:
        """The folder that holds ``snapshots/`` (a POSIX path: publishing relies on an atomic
        rename)."""
        if not is_uri(self.home):
            return Path(self.snapshot_home or self.home).expanduser()
        if not self.snapshot_home or is_uri(self.snapshot_home):
            raise ConfigError(
                "snapshots need a local or mounted path: "
                f"set QORTEX_SNAPSHOT_HOME (home is {self.home})"
            )
        from qortex_core.storage.snapshot import snapshot_home

        return snapshot_home(self.home, self.snapshot_home)  # a tenant's under tenants/NAME


class SourceResource(ConfigurableResource):
    """The source directory of documents.

    Attributes:
        path: the directory.
        domain: one domain for every document; empty: the first-level folder names the domain.
    """

    path: str
    domain: str = ""

    def config(self) -> SourceConfig:
        return SourceConfig(root=Path(self.path).expanduser(), domain=self.domain)


class EmbedderResource(ConfigurableResource):
    """The embedder: ``bundled`` (all-MiniLM-L6-v2, offline), ``st:/path`` or ``openai:MODEL``."""

    spec: str = "bundled"
    base_url: str = ""
    api_key: str = ""

    def get(self) -> Embedder:
        """The embedder, loaded on first use and shared within the process."""
        return shared_embedder(self.spec, self.base_url, self.api_key)


@dataclass(frozen=True)
class ExtractorSettings:
    """Which extractor to build, and its endpoint for ``llm``.

    ``auto`` means ``llm`` when an API key or base URL is configured, else ``offline``.
    """

    kind: str = "auto"
    openie_path: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""

    def __post_init__(self) -> None:
        if self.kind not in EXTRACTORS:
            raise ConfigError(
                f"unknown extractor {self.kind!r}: use one of {', '.join(EXTRACTORS)}"
            )


def resolved_kind(settings: ExtractorSettings) -> str:
    """The extractor kind after resolving ``auto``."""
    if settings.kind != "auto":
        return settings.kind
    return "llm" if (settings.api_key or settings.base_url) else "offline"


def make_extractor(settings: ExtractorSettings, env: Mapping[str, str] | None = None) -> Extractor:
    """Build the configured extractor; the LLM extractor module is imported only when chosen.

    Raises:
        ConfigError: ``recorded`` without an OpenIE file, or an LLM setting that does not parse.
        DatasetError: the OpenIE file is unreadable.
    """
    kind = resolved_kind(settings)
    if kind == "offline":
        return OfflineExtractor()
    if kind == "recorded":
        if not settings.openie_path:
            raise ConfigError("extractor 'recorded' needs an OpenIE file: set QORTEX_OPENIE")
        return RecordedExtractor(settings.openie_path)
    from qortex_core.ingest.llm_extract import LLMExtractor
    from qortex_core.llm.client import LLMConfig

    overrides = {
        name: value
        for name, value in (
            ("llm_model", settings.model),
            ("llm_base_url", settings.base_url),
            ("llm_api_key", settings.api_key),
        )
        if value
    }
    configured = get_settings(env).model_copy(update=overrides)
    return LLMExtractor(LLMConfig.from_settings(configured))


class ExtractorResource(ConfigurableResource):
    """The extractor: ``llm`` (openai + instructor), ``offline``, ``recorded`` (OpenIE replay) or
    ``auto``."""

    kind: str = "auto"
    openie_path: str = ""
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    _extractor: Extractor | None = PrivateAttr(default=None)

    def settings(self) -> ExtractorSettings:
        return ExtractorSettings(
            self.kind, self.openie_path, self.model, self.base_url, self.api_key
        )

    def get(self) -> Extractor:
        """The extractor, built on first use."""
        if self._extractor is None:
            self._extractor = make_extractor(self.settings())
        return self._extractor


def _value(settings: Settings, name: str, default: str = "") -> str | EnvVar:
    """``EnvVar(name)`` when the variable is set (resolved in the run process), else ``default``."""
    return EnvVar(name) if settings.provided(name) else default


def build_resources(env: Mapping[str, str]) -> dict[str, ConfigurableResource]:
    """Resources from environment variables (see :mod:`pipelines.definitions`).

    Raises:
        ConfigError: a variable has a bad value.
    """
    home_default = str(Path.home() / ".qortex")
    settings = get_settings(env)
    return {
        "store": StoreResource(
            home=_value(settings, "QORTEX_HOME", home_default),
            snapshot_home=_value(settings, "QORTEX_SNAPSHOT_HOME"),
        ),
        "source": SourceResource(
            path=_value(settings, "QORTEX_SOURCE_DIR", str(SAMPLES)),
            domain=_value(settings, "QORTEX_DOMAIN"),
        ),
        "embedder": EmbedderResource(
            spec=_value(settings, "QORTEX_EMBEDDER", "bundled"),
            base_url=_value(settings, "QORTEX_EMBED_BASE_URL"),
            api_key=_value(settings, "QORTEX_EMBED_API_KEY"),
        ),
        "extractor": ExtractorResource(
            kind=_value(settings, "QORTEX_EXTRACTOR", "auto"),
            openie_path=_value(settings, "QORTEX_OPENIE"),
            model=_value(settings, "QORTEX_LLM_MODEL"),
            base_url=_value(settings, "QORTEX_LLM_BASE_URL"),
            api_key=_value(settings, "QORTEX_LLM_API_KEY") or _value(settings, "OPENAI_API_KEY"),
        ),
    }
