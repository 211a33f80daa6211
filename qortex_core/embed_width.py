"""An embedder's vector width when it is known without loading or calling the model.

``qortex doctor --no-probe`` compares a snapshot's vectors with the configured embedder and
must stay cheap: a local sentence-transformers model states its width in its folder
(``modules.json`` and the pooling layer's ``config.json``); the hash embedder and an OpenAI
embedder with a configured dimension state it in their config. Anything else is unknown (None).
"""

from __future__ import annotations

import json
from pathlib import Path

from qortex_core.embed import (
    EmbedderWrapper,
    HashEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    bundled_model_path,
)

# sentence-transformers modules that keep the pooled width (a Dense layer would change it)
_WIDTH_KEEPING = ("Transformer", "Pooling", "Normalize")


def declared_dim(embedder: object) -> int | None:
    """The width of ``embedder``'s vectors, or None when only the model itself could say."""
    if isinstance(embedder, EmbedderWrapper):
        return declared_dim(embedder.inner)
    if isinstance(embedder, HashEmbedder):
        return embedder.config.dim
    if isinstance(embedder, OpenAIEmbedder):
        return embedder.config.dim or None
    if isinstance(embedder, SentenceTransformerEmbedder):
        path = embedder.config.path or bundled_model_path()
        return folder_dim(Path(path))
    return None


def folder_dim(folder: Path) -> int | None:
    """The pooled width a sentence-transformers model folder declares (None: not declared, or
    a module that may change it)."""
    try:
        modules = json.loads((folder / "modules.json").read_text())
        kinds = [str(m["type"]).rpartition(".")[2] for m in modules]
        if any(kind not in _WIDTH_KEEPING for kind in kinds):
            return None
        pooling = next(m for m in modules if str(m["type"]).endswith("Pooling"))
        config = json.loads((folder / pooling["path"] / "config.json").read_text())
        return int(config["word_embedding_dimension"])
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None
