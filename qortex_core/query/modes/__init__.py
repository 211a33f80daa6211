"""Retrieval modes as objects: one module per mode, each exporting ``MODE`` (see :mod:`.base`).

The registry is discovered from this package, so adding a mode is one new module (and
its test); the CLI help, the MCP enum, query validation and ``qortex eval``'s defaults
read :func:`names` and :func:`eval_defaults`. ``auto`` comes first (it is the default);
the others follow by name.

May import: ``qortex_core.query`` steps (config, seeding, scoring, ppr, fusion, ...).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from qortex_core.errors import QueryError, did_you_mean
from qortex_core.query.modes.base import Mode, QueryContext, Ranking, dense_ranking

__all__ = ["Mode", "QueryContext", "Ranking", "dense_ranking", "eval_defaults", "get", "names"]

DEFAULT = "auto"


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Mode]:
    """Mode name -> mode, from every module of this package that exports ``MODE``."""
    found: dict[str, Mode] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        mode = getattr(module, "MODE", None)
        if mode is not None:
            if mode.name in found:
                raise RuntimeError(f"two retrieval modes are named {mode.name!r}")
            found[mode.name] = mode
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != DEFAULT, kv[0])))


def names() -> tuple[str, ...]:
    """Every mode name, the default first."""
    return tuple(registry())


def eval_defaults() -> tuple[str, ...]:
    """The modes ``qortex eval`` scores when none are given."""
    return tuple(name for name, mode in registry().items() if mode.in_eval)


def get(name: str) -> Mode:
    """The mode called ``name``, or a :class:`QueryError` naming the known ones."""
    modes = registry()
    if not isinstance(name, str) or name not in modes:
        hint = did_you_mean(name, modes)
        raise QueryError(f"unknown mode {name!r}{hint or ':'} use one of {', '.join(modes)}")
    return modes[name]
