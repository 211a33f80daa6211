"""``qortex bench embed``: qortex's embedder against plain ``SentenceTransformer.encode`` on the
same texts and the same device, timed in one run, taking turns.

The plain side is what a user would write: the bundled model loaded on the device (fp16 on
CUDA), ``encode`` with sentence-transformers' default batch of 32. qortex's side is
:func:`qortex_core.embed.make_embedder` with ``QORTEX_EMBED_DEVICE`` as given, so the ratio
shows what qortex's placement (device, precision, batch) costs or saves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from qortex_core.embed import SentenceTransformerConfig, SentenceTransformerEmbedder
from qortex_core.embed_device import choose_placement


@dataclass(frozen=True)
class EmbedSpeed:
    """One measurement.

    Attributes:
        device: where both sides ran.
        texts: texts embedded per pass.
        qortex_per_s: qortex's texts a second (best pass).
        plain_per_s: plain encode's texts a second (best pass).
        ratio: qortex's seconds over plain's (1.0: the same; < 1: qortex faster).
        min_cosine: the lowest cosine between the two sides' vectors of one text.
    """

    device: str
    texts: int
    qortex_per_s: float
    plain_per_s: float
    ratio: float
    min_cosine: float


def _plain_model(device: str):  # type: ignore[no-untyped-def]
    from sentence_transformers import SentenceTransformer

    from qortex_core.embed import bundled_model_path

    model = SentenceTransformer(bundled_model_path(), device=device, local_files_only=True)
    return model.half() if device == "cuda" else model


def _best(seconds: list[float], count: int) -> float:
    return count / max(min(seconds), 1e-9)


def measure(texts: Sequence[str], device_choice: str = "auto", rounds: int = 3) -> EmbedSpeed:
    """Time qortex's embedder and plain encode on ``texts``, ``rounds`` passes each in turn."""
    placement = choose_placement(device_choice)
    ours = SentenceTransformerEmbedder(SentenceTransformerConfig(device=device_choice))
    plain = _plain_model(placement.device)
    ours.embed(list(texts[:8]))  # load and warm both
    plain.encode(list(texts[:8]))
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        a = ours.embed(list(texts))
        mine.append(time.perf_counter() - start)
        start = time.perf_counter()
        b = plain.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        theirs.append(time.perf_counter() - start)
    b = np.asarray(b, dtype=np.float32)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    cosine = float(np.min(np.sum(a * b, axis=1)))
    return EmbedSpeed(
        device=placement.device,
        texts=len(texts),
        qortex_per_s=_best(mine, len(texts)),
        plain_per_s=_best(theirs, len(texts)),
        ratio=min(mine) / max(min(theirs), 1e-9),
        min_cosine=cosine,
    )
