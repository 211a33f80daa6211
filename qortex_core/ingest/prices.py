"""USD prices per 1,000 tokens of common hosted chat models, for the extraction cost estimate.

Prices set in the configuration (``QORTEX_LLM_PRICE_IN_PER_1K`` / ``_OUT_PER_1K``) override the
table; a model that is not listed (a local server) costs 0. Figures are list prices
(standard tier) as published by the providers; check them before relying on the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_PER_1K: dict[str, tuple[float, float]] = {  # model -> (input, output)
    "gpt-4o-mini": (0.00015, 0.0006),
    "gpt-4o": (0.0025, 0.01),
    "gpt-4.1": (0.002, 0.008),
    "gpt-4.1-mini": (0.0004, 0.0016),
    "gpt-4.1-nano": (0.0001, 0.0004),
    "gpt-3.5-turbo": (0.0005, 0.0015),
    "gpt-3.5-turbo-1106": (0.001, 0.002),
    "o3-mini": (0.0011, 0.0044),
    "claude-3-5-haiku-latest": (0.0008, 0.004),
    "claude-3-5-sonnet-latest": (0.003, 0.015),
}


@dataclass(frozen=True)
class Price:
    """Input and output USD per 1,000 tokens, and where they came from."""

    input_per_1k: float
    output_per_1k: float
    source: str  # "configured", "table" or "unknown model"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens / 1000 * self.input_per_1k + completion_tokens / 1000 * self.output_per_1k
        )


def price_of(model: str, configured_in: float = 0.0, configured_out: float = 0.0) -> Price:
    """The configured prices when either is set, else the table's (dated suffixes matched)."""
    if configured_in or configured_out:
        return Price(configured_in, configured_out, "configured")
    name = model.split("/")[-1]
    for key in sorted(PRICES_PER_1K, key=len, reverse=True):  # longest prefix first
        if name == key or name.startswith(key + "-20"):
            return Price(*PRICES_PER_1K[key], "table")
    return Price(0.0, 0.0, "unknown model")
