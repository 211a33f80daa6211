"""``qortex bench ppr`` and ``qortex bench query`` (issue: fast retrieval at scale)."""

from __future__ import annotations

import argparse


def register(kinds: argparse._SubParsersAction) -> None:
    """Add the ``ppr`` and ``query`` benchmarks (not yet built)."""
