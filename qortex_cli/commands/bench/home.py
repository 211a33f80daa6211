"""A benchmark's data home: emptied first when ``--fresh-home`` says so."""

from __future__ import annotations

import shutil
from pathlib import Path

FRESH_HINT = "use --fresh-home (delete it first)"


def clear_home(home: Path, fresh: bool, hint: str = FRESH_HINT) -> None:
    """Make ``home`` empty for a benchmark run: delete it when ``fresh`` (``--fresh-home``).

    Raises:
        ConfigError: ``home`` holds files and ``fresh`` is False (``hint`` says what to pass).
    """
    from qortex_core.errors import ConfigError

    if home.exists() and any(home.iterdir()):
        if not fresh:
            raise ConfigError(f"{home} is not empty: {hint}")
        shutil.rmtree(home)
