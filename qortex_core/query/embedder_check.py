"""The query embedder must be the one the snapshot was built with.

Vectors of another model live in another space: of another dimension they crash the cosine,
of the same dimension they rank by meaningless cosines. A snapshot records the model it was
embedded with (``embedding_model`` in its manifest); a retriever whose embedder differs is
refused with one line naming both, before any query is answered.
"""

from __future__ import annotations

from qortex_core.embed import Embedder
from qortex_core.errors import ConfigError
from qortex_core.storage.snapshot import Snapshot


def check_embedder(snapshot: Snapshot, embedder: Embedder) -> None:
    """Refuse ``embedder`` unless it is the model (and dimension) ``snapshot`` was built with.

    Raises:
        ConfigError: another model name, or the same name with another dimension.
    """
    built = str(snapshot.manifest.get("embedding_model") or "")
    vectors = snapshot.arrays.get("passage_vectors")
    dim = int(vectors.shape[1]) if vectors is not None and vectors.ndim == 2 else 0
    name = snapshot.manifest.get("name", "?")
    fix = (
        "query with the snapshot's model (QORTEX_EMBEDDER), or re-ingest to re-embed with "
        "the new one"
    )
    if built and embedder.name != built:
        raise ConfigError(
            f"snapshot {name} was embedded with {built!r} ({dim}-d) but the query embedder is "
            f"{embedder.name!r}: {fix}"
        )
    if dim and embedder.dim != dim:
        raise ConfigError(
            f"snapshot {name} was embedded with {built or 'an unnamed model'!r} ({dim}-d) but the "
            f"query embedder {embedder.name!r} makes {embedder.dim}-d vectors: {fix}"
        )
