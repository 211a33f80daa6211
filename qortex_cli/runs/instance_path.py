"""Which folders can hold a Dagster instance: its SQLite URLs are built from unquoted paths."""

from __future__ import annotations

from pathlib import Path

from qortex_core.errors import ConfigError

URL_CHARACTERS = "?#%"  # Dagster builds "sqlite:///<path>/runs.db" without quoting the path


def check_dagster_home(dagster_home: Path) -> None:
    """Refuse an instance folder whose absolute path a SQLite URL would misread.

    Raises:
        ConfigError: the path holds ``?``, ``#`` or ``%`` (with ``?`` Dagster would create its
            database outside the folder); spaces and non-ASCII letters are fine.
    """
    path = str(Path(dagster_home).expanduser().absolute())
    bad = sorted({c for c in path if c in URL_CHARACTERS})
    if bad:
        raise ConfigError(
            f"the Dagster instance folder {path} contains {' '.join(repr(c) for c in bad)}, "
            "which Dagster's SQLite storage cannot open: choose a data home without ? # % "
            "or set DAGSTER_HOME to a folder without them"
        )
