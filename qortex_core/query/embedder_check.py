"""The query embedder must be the one the snapshot was built with.

Vectors of another model live in another space: of another dimension they crash the cosine,
of the same dimension they rank by meaningless cosines. A snapshot records the model it was
embedded with (``embedding_model`` in its manifest); a retriever whose embedder differs is
refused with one line naming both, before any query is answered.

A snapshot with no passage (a home whose every memory was forgotten) holds no vector to
compare: its placeholder arrays' width says nothing about the model, and it is accepted.
"""

from __future__ import annotations

from typing import Callable

from qortex_core.embed import Embedder
from qortex_core.errors import ConfigError
from qortex_core.storage.snapshot import Snapshot

VECTOR_ARRAYS = ("passage_vectors", "fact_vectors", "phrase_vectors")
FIX = "query with the snapshot's model (QORTEX_EMBEDDER), or re-ingest to re-embed with the new one"


def vector_widths(snapshot: Snapshot) -> dict[str, int]:
    """Array name -> width of the snapshot's vector arrays that hold at least one row."""
    out = {}
    for name in VECTOR_ARRAYS:
        array = snapshot.arrays.get(name)
        if array is not None and array.ndim == 2 and array.shape[0] > 0:
            out[name] = int(array.shape[1])
    return out


def embedder_problem(snapshot: Snapshot, name: str, dim: Callable[[], int | None]) -> str | None:
    """Why the embedder called ``name`` cannot query ``snapshot`` (None: it can).

    Args:
        name: the embedder's model name; dim: returns its vector width (None: unknown without
            loading the model), called only when the snapshot holds vectors.
    """
    built = str(snapshot.manifest.get("embedding_model") or "")
    label = snapshot.manifest.get("name", "?")
    widths = vector_widths(snapshot)
    shown = f" ({next(iter(widths.values()))}-d)" if widths else ""
    if built and name != built:
        return f"snapshot {label} was embedded with {built!r}{shown} but the embedder is {name!r}"
    if len(set(widths.values())) > 1:
        sizes = ", ".join(f"{k} {v}-d" for k, v in widths.items())
        return f"snapshot {label} holds vectors of different widths ({sizes})"
    if not widths:
        return None
    width, want = next(iter(widths.values())), dim()
    if want is not None and want != width:
        return (
            f"snapshot {label} was embedded with {built or 'an unnamed model'!r} ({width}-d) but "
            f"the embedder {name!r} makes {want}-d vectors"
        )
    return None


def check_embedder(snapshot: Snapshot, embedder: Embedder) -> None:
    """Refuse ``embedder`` unless it is the model (and dimension) ``snapshot`` was built with.

    Raises:
        ConfigError: another model name, or the same name with another dimension.
    """
    problem = embedder_problem(snapshot, embedder.name, lambda: embedder.dim)
    if problem is not None:
        raise ConfigError(f"{problem}: {FIX}")
