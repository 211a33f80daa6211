"""``qortex bench ingest`` (issue: Dagster pipeline)."""

from __future__ import annotations

import argparse


def register(kinds: argparse._SubParsersAction) -> None:
    """Add the ``ingest`` benchmark (not yet built)."""
