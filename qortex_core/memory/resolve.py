"""An LLM resolve step for supersession, used only when configured (offline stays the default).

:class:`LLMResolver` asks an OpenAI-compatible endpoint, through instructor and the pydantic
model :class:`SameAttribute`, whether a later statement gives the same attribute of the same
subject as an earlier one (so that, with another value, it replaces it). The offline test of
:mod:`qortex_core.memory.supersede` picks the candidates (same subject, the closest by vector,
an attribute score above ``ask_floor``); the answer decides for each. A call that fails (the
endpoint down, a quota, an answer that breaks the model after the re-asks) leaves the offline
decision and is counted in :attr:`LLMResolver.failures`: a write never fails for it.

Configured by ``MemoryOptions(resolver=LLMResolver(LLMConfig(...)))`` or by the environment:
``QORTEX_SUPERSEDE_RESOLVE=llm`` with the ``QORTEX_LLM_*`` settings (:func:`from_env`).
"""

from __future__ import annotations

import os
import threading
from typing import Mapping

from pydantic import BaseModel, Field

from qortex_core.errors import ConfigError
from qortex_core.llm.client import LLMConfig, create_with_retries, instructor_client

PROMPT_VERSION = "supersede-1"
RESOLVE_ENV = "QORTEX_SUPERSEDE_RESOLVE"
_SYSTEM = (
    "You maintain an agent's memory of facts. Given an earlier and a later statement about the "
    "same subject, say whether they state the same attribute of that subject (where someone "
    "lives, works, who they report to, a project's status, ...), so that the later one, if it "
    "gives another value, replaces the earlier. Different attributes of one subject (a home "
    "and a car, an employer and a hobby) are not the same attribute."
)


class SameAttribute(BaseModel):
    """The resolver's answer."""

    same_attribute: bool = Field(
        description="true when both statements give the same attribute of the same subject"
    )
    reason: str = Field(default="", description="one short sentence")


class LLMResolver:
    """Asks an LLM whether a later statement replaces an earlier one (see the module doc)."""

    def __init__(self, config: LLMConfig, ask_floor: float = 0.0) -> None:
        self.config = config
        self.ask_floor = ask_floor
        self.failures = 0
        self.calls = 0
        self._client = None
        self._lock = threading.Lock()

    def _instructor(self):
        with self._lock:
            if self._client is None:
                self._client = instructor_client(self.config, {})
            return self._client

    def same_attribute(self, earlier: str, later: str) -> bool | None:
        """The LLM's answer, or None when the call failed (the offline decision stands)."""
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"<earlier>\n{earlier}\n</earlier>\n"
                                        f"<later>\n{later}\n</later>"},
        ]  # fmt: skip
        self.calls += 1
        try:
            answer = create_with_retries(
                self._instructor(), self.config, messages, SameAttribute, "supersede"
            )
        except Exception:  # noqa: BLE001  (any failure: the offline decision stands)
            self.failures += 1
            return None
        return bool(answer.same_attribute)


def from_env(env: Mapping[str, str] | None = None) -> LLMResolver | None:
    """The resolver the environment configures (``QORTEX_SUPERSEDE_RESOLVE=llm``), else None.

    Raises:
        ConfigError: an unknown value, or ``llm`` without an LLM configured.
    """
    env = os.environ if env is None else env
    value = (env.get(RESOLVE_ENV) or "offline").strip().lower()
    if value == "offline":
        return None
    if value != "llm":
        raise ConfigError(f"{RESOLVE_ENV} must be 'offline' or 'llm', got {value!r:.40}")
    return LLMResolver(LLMConfig.from_env(env))
