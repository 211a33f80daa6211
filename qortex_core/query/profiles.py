"""Scoring profiles: final score = weights x (relevance, recency, salience, preference).

Profiles are named; ``default`` is relevance only (the retrieval score as is).
Built-in profiles can be extended or overridden by ``<home>/profiles.json``::

    {"mine": {"relevance": 0.8, "preference": 0.2}}
"""

from __future__ import annotations

import datetime as dt
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from qortex_core.errors import ConfigError
from qortex_core.storage.source_files import load_json, read_bounded
from qortex_core.storage.store import is_uri

COMPONENTS = ("relevance", "recency", "salience", "preference")
PROFILE_FILE = "profiles.json"
MAX_PROFILE_BYTES = 1 << 20
MAX_WEIGHT = 1000.0  # weights are relative: a larger one only overflows the sum
MAX_HALF_LIFE_DAYS = 3_650_000.0  # ten thousand years


def _short(value: object) -> str:
    """``repr(value)``, cut to 40 characters."""
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python prints
        return "an integer too long to print"
    return text if len(text) <= 40 else text[:37] + "..."


def field_problem(field: str, value: object) -> str | None:
    """What is wrong with one profile field's value (None: nothing)."""
    x = math.nan  # NaN (not a number, or a NaN) fails every range check below
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            x = float(value)
        except OverflowError:  # an int past float's range
            x = math.inf
    if field == "recency_half_life_days":
        if not 0 < x <= MAX_HALF_LIFE_DAYS:  # NaN fails every comparison
            limit = int(MAX_HALF_LIFE_DAYS)
            return f"must be a positive number of days up to {limit}, got {_short(value)}"
    elif not 0 <= x <= MAX_WEIGHT:
        return f"must be a number from 0 to {int(MAX_WEIGHT)}, got {_short(value)}"
    return None


@dataclass(frozen=True)
class ScoringProfile:
    """Weights of the four score components (each component lies in [0, 1] except raw relevance)."""

    name: str = "default"
    relevance: float = 1.0
    recency: float = 0.0
    salience: float = 0.0
    preference: float = 0.0
    recency_half_life_days: float = 30.0

    def __post_init__(self) -> None:
        for field in (*COMPONENTS, "recency_half_life_days"):
            problem = field_problem(field, getattr(self, field))
            if problem:
                raise ConfigError(f"profile {self.name!r}: {field} {problem}")
        if sum(getattr(self, c) for c in COMPONENTS) <= 0:
            raise ConfigError(
                f"profile {self.name!r}: weights must be non-negative numbers with a positive sum"
            )

    @property
    def relevance_only(self) -> bool:
        return all(getattr(self, c) == 0 for c in COMPONENTS[1:])

    def weights(self) -> dict[str, float]:
        return {c: float(getattr(self, c)) for c in COMPONENTS}


BUILTIN = {
    "default": ScoringProfile("default"),
    "balanced": ScoringProfile(
        "balanced", relevance=0.7, recency=0.1, salience=0.1, preference=0.1
    ),
    "preference": ScoringProfile("preference", relevance=0.7, preference=0.3),
    "recent": ScoringProfile("recent", relevance=0.6, recency=0.4),
}


def load_profiles(home: str | Path | None = None) -> dict[str, ScoringProfile]:
    """Built-in profiles, updated from ``<home>/profiles.json`` when it exists.

    Raises:
        ConfigError: the file is not valid JSON, names unknown fields, or gives a field a value
            that is not a finite number in its range (a weight 0-1000, a half-life > 0 days).
    """
    profiles = dict(BUILTIN)
    path = Path(home) / PROFILE_FILE if home is not None and not is_uri(home) else None
    if path is None or not path.is_file():
        return profiles
    try:  # bounded, never blocking (a FIFO swapped in), nesting and bad UTF-8 are reasons
        data = load_json(read_bounded(path, MAX_PROFILE_BYTES).data.decode("utf-8"))
    except ValueError as exc:
        raise ConfigError(f"cannot read scoring profiles {path}: {exc}; fix or remove it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected an object of profile name -> weights")
    for name, weights in data.items():
        profiles[name] = _profile_from(path, name, weights)
    return profiles


def _profile_from(path: Path, name: str, weights: object) -> ScoringProfile:
    """One entry of ``profiles.json`` as a profile, each field checked.

    Raises:
        ConfigError: one line naming the file, the profile and the field.
    """
    fields = set(asdict(ScoringProfile())) - {"name"}
    if not isinstance(weights, dict) or set(weights) - fields:
        raise ConfigError(
            f"{path}: profile {_short(name)} must map some of {sorted(fields)} to numbers"
        )
    for field, value in weights.items():
        problem = field_problem(field, value)
        if problem:
            raise ConfigError(f"{path}: profile {_short(name)}: {_short(field)} {problem}")
    try:
        return ScoringProfile(name=name, **({c: 0.0 for c in COMPONENTS} | weights))
    except ConfigError as exc:  # no positive weight
        raise ConfigError(f"{path}: {exc}") from None


def get_profile(
    name: str | ScoringProfile | None, home: str | Path | None = None
) -> ScoringProfile:
    """A profile by name (``None`` -> ``default``).

    Raises:
        ConfigError: no profile of that name.
    """
    if isinstance(name, ScoringProfile):
        return name
    profiles = load_profiles(home)
    key = name or "default"
    if key not in profiles:
        raise ConfigError(
            f"unknown scoring profile {key!r}: use one of {', '.join(sorted(profiles))}"
        )
    return profiles[key]


# -- components ---------------------------------------------------------------------------
def recency(
    timestamps: np.ndarray | None, n: int, half_life_days: float, now: dt.datetime | None = None
) -> np.ndarray:
    """0.5 ** (age / half-life) per passage from epoch seconds (NaN: no time -> 0); zeros when
    passages carry no time at all; a time in the future counts as now."""
    if timestamps is None:
        return np.zeros(n, np.float32)
    now_s = (now or dt.datetime.now(dt.timezone.utc)).timestamp()
    age_days = np.maximum(now_s - np.asarray(timestamps, dtype=np.float64), 0.0) / 86400.0
    return np.nan_to_num(np.power(0.5, age_days / half_life_days), nan=0.0).astype(np.float32)


class Recency:
    """:func:`recency` of one snapshot's passages as of the current minute, computed once a
    minute per half-life (a minute moves no half-life measured in days)."""

    def __init__(self, timestamps: np.ndarray | None, n: int) -> None:
        self.timestamps, self.n = timestamps, n
        self._cached: tuple[tuple[float, int], np.ndarray] | None = None

    def __call__(self, half_life_days: float) -> np.ndarray:
        minute = int(time.time() // 60)
        cached = self._cached
        if cached is None or cached[0] != (half_life_days, minute):
            at = dt.datetime.fromtimestamp(minute * 60, dt.timezone.utc)
            cached = (half_life_days, minute), recency(self.timestamps, self.n, half_life_days, at)
            self._cached = cached
        return cached[1]


def _min_max(x: np.ndarray) -> np.ndarray:
    finite = np.isfinite(x)
    if not finite.any():
        return np.zeros_like(x)
    lo, hi = float(x[finite].min()), float(x[finite].max())
    out = np.ones_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)
    return np.where(finite, out, 0.0).astype(np.float32)


def combine(
    profile: ScoringProfile, relevance: np.ndarray, components: dict[str, np.ndarray]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Final scores and the per-component breakdown.

    Args:
        profile: the weights.
        relevance: (n,) raw retrieval scores.
        components: (n,) arrays for ``recency``, ``salience`` and ``preference``, each in [0, 1].

    Returns:
        The final (n,) score (the raw relevance for a relevance-only profile, else the
        weighted sum with min-max scaled relevance) and every component by name.
    """
    rel = np.asarray(relevance, dtype=np.float32)
    parts = {"relevance": rel if profile.relevance_only else _min_max(rel)}
    parts |= {
        c: np.asarray(components.get(c, np.zeros_like(rel)), dtype=np.float32)
        for c in COMPONENTS[1:]
    }
    if profile.relevance_only:
        return rel * np.float32(profile.relevance), parts
    final = sum(np.float32(getattr(profile, c)) * parts[c] for c in COMPONENTS)
    return np.asarray(final, dtype=np.float32), parts
