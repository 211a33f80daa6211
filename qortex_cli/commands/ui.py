"""``qortex ui`` (alias ``qortex dev``): the Dagster UI on the same home and instance as the CLI.

``qortex ingest`` records its runs in the instance under ``$DAGSTER_HOME`` (default
``<data home>/dagster``); this command starts ``dagster dev`` (webserver and daemon) on that
instance with ``QORTEX_HOME`` set to the same home, so the UI shows the CLI's runs, assets and
row counts, and what the UI launches writes where the CLI reads.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def ui_command(
    home: Path | str, dagster_home: Path, host: str, port: int
) -> tuple[list[str], dict]:
    """The ``dagster dev`` command line and environment for ``home`` (the instance prepared)."""
    from qortex_cli.runs.local import local_instance

    local_instance(dagster_home).dispose()  # creates dagster.yaml there (or refuses the path)
    env = dict(os.environ, QORTEX_HOME=str(home), DAGSTER_HOME=str(dagster_home))
    argv = [sys.executable, "-m", "dagster", "dev", "-m", "pipelines.definitions"]
    return argv + ["--host", host, "--port", str(port)], env


def cmd_ui(args: argparse.Namespace) -> int:
    from qortex_core.settings import get_settings
    from qortex_core.storage.store import default_home, is_uri

    raw = args.home or default_home()
    settings = get_settings()
    if is_uri(raw) and not settings.dagster_home:
        from qortex_core.errors import ConfigError

        raise ConfigError(f"data home {raw} is a URI: set DAGSTER_HOME to a local folder")
    home = raw if is_uri(raw) else Path(raw).expanduser().absolute()
    dagster_home = Path(settings.dagster_home or Path(home) / "dagster").absolute()
    argv, env = ui_command(home, dagster_home, args.host, args.port)
    print(
        f"qortex ui: data home {home}, Dagster instance {dagster_home}, "
        f"http://{args.host}:{args.port}",
        file=sys.stderr,
        flush=True,
    )
    os.execvpe(argv[0], argv, env)
    return 0  # not reached


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        aliases=["dev"],
        help="start the Dagster UI (dagster dev) on the home's instance, where ingest records runs",
    )
    p.add_argument("--home", help="data home (default: $QORTEX_HOME or ~/.qortex)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.set_defaults(func=cmd_ui)
