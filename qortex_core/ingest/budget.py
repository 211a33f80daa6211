"""The extraction failure budget: when failed chunks fail the run instead of a quiet snapshot.

A chunk that failed for a reason retrying will not heal (HTTP 401/403/404: a bad key, no
access, an unknown model) fails the run at once by default; otherwise the run fails when more
than ``max_failed_share`` of the chunks are failed. Below the budget, failures stay recorded
and are retried on the next run. The ``extractions`` asset's blocking check applies it, so a
run over budget publishes no snapshot and the previous one keeps answering.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from qortex_core.errors import ConfigError
from qortex_core.settings import get_settings

_PERMANENT = re.compile(r"\bHTTP (401|403|404)\b")


@dataclass(frozen=True)
class FailureBudget:
    """How many failed chunks a run may leave behind.

    Raises:
        ConfigError: ``max_failed_share`` is not in [0, 1].
    """

    max_failed_share: float = 0.05
    allow_permanent: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.max_failed_share <= 1.0:
            raise ConfigError(f"max failed share must be in [0, 1], got {self.max_failed_share}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FailureBudget:
        """``QORTEX_MAX_FAILED_SHARE`` (default 0.05), ``QORTEX_ALLOW_PERMANENT_FAILURES=on``.

        Raises:
            ConfigError: the share does not parse or is out of range.
        """
        settings = get_settings(env)
        return cls(settings.max_failed_share, settings.allow_permanent_failures == "on")


def is_permanent(error: str) -> bool:
    """Whether a recorded extraction error will not heal by retrying (HTTP 401/403/404)."""
    return bool(_PERMANENT.search(error))


@dataclass(frozen=True)
class BudgetVerdict:
    """The failure budget applied to one extraction state."""

    chunks: int
    failed: int
    permanent: int
    passed: bool
    message: str
    first_error: str = ""


def judge(errors: Sequence[str], chunks: int, budget: FailureBudget) -> BudgetVerdict:
    """Apply ``budget`` to the error texts of the failed chunks among ``chunks`` chunks."""
    failed = len(errors)
    permanent = [e for e in errors if is_permanent(e)]
    share = failed / chunks if chunks else 0.0
    first = (permanent or list(errors) or [""])[0]
    if permanent and not budget.allow_permanent:
        message = (
            f"{failed} of {chunks} chunks failed extraction, {len(permanent)} for a reason "
            f"retrying will not fix ({first})"
        )
        return BudgetVerdict(chunks, failed, len(permanent), False, message, first)
    if share > budget.max_failed_share:
        message = (
            f"{failed} of {chunks} chunks failed extraction ({share:.0%}, over the "
            f"{budget.max_failed_share:.0%} budget; first: {first})"
        )
        return BudgetVerdict(chunks, failed, len(permanent), False, message, first)
    message = f"{failed} of {chunks} chunks failed extraction (within budget; retried next run)"
    return BudgetVerdict(chunks, failed, len(permanent), True, message, first)
