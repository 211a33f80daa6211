"""How many threads a step may use: the cores this process may run on, capped."""

from __future__ import annotations

import os


def usable_cores(cap: int) -> int:
    """The cores this process may run on (its affinity mask, not the machine's count), at
    most ``cap`` and at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, cap))
