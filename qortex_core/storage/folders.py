"""A writer's folder (the data home, ``DAGSTER_HOME``): created, and checked writable."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import cast

from qortex_core.errors import HomeError, QortexError, StorageError, storage_error


def prepare_folder(home: Path, label: str = "data home") -> None:
    """Create a writer's folder (the data home, DAGSTER_HOME) and check it is writable.

    Raises:
        StorageError: it lies on a read-only filesystem, or the disk refused the folder.
        HomeError: it cannot be created or is not writable (permissions).
    """
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f"cannot create {label} {home}"
        error: QortexError = storage_error(where, exc) or HomeError(f"{where}: {exc.strerror}")
        raise error from None
    if os.statvfs(home).f_flag & os.ST_RDONLY:
        # EROFS is an environment failure, so storage_error never returns None here
        problem = storage_error(f"{label} {home} cannot be written", OSError(errno.EROFS, "ro"))
        raise cast(StorageError, problem)
    if not os.access(home, os.W_OK | os.X_OK):
        raise HomeError(
            f"{label} {home} is not writable: fix its permissions or mount, or choose another"
        )
