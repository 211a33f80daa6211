"""Tenant namespaces: one data home subfolder per tenant.

Each tenant has its own LanceDB database, snapshots, feedback and factors, so
one tenant's memory is invisible to another even when their texts overlap.
The default tenant is the data home itself; tenant ``t`` lives in
``<home>/tenants/t``.
"""

from __future__ import annotations

import re
from pathlib import Path

from qortex_core.errors import ConfigError
from qortex_core.storage.store import default_home, home_of, is_uri

DEFAULT = "default"
TENANTS_DIR = "tenants"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # used with fullmatch: "t\n" is refused


def validate_tenant(name: str | None) -> str:
    """The tenant name to use (``None`` -> ``default``).

    Raises:
        ConfigError: not 1-64 lower-case letters, digits, ``_`` or ``-`` (starting with a letter or
        digit).
    """
    if name is None or name == DEFAULT:
        return DEFAULT
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"bad tenant name {name!r}: use 1-64 of a-z, 0-9, '_' and '-', starting with a letter "
            "or digit"
        )
    return name


def tenant_home(home: str | Path | None, tenant: str | None = None) -> Path | str:
    """The data home of ``tenant`` under ``home`` (a path, or a URI string for object stores).

    Every entry point takes its home through here (the library, the retriever, the CLI, MCP),
    so ``~`` is expanded once for all: ``home`` None is ``$QORTEX_HOME`` or ``~/.qortex``.
    """
    name = validate_tenant(tenant)
    base = home_of(home) if home else default_home()
    if name == DEFAULT:
        return base
    if is_uri(base):
        return str(base).rstrip("/") + f"/{TENANTS_DIR}/{name}"
    return Path(base) / TENANTS_DIR / name


def list_tenants(home: str | Path) -> list[str]:
    """Tenants that have a folder under ``home`` (the default tenant is always listed)."""
    root = Path(home).expanduser() / TENANTS_DIR
    found = (
        sorted(p.name for p in root.iterdir() if p.is_dir() and _NAME.fullmatch(p.name))
        if root.is_dir()
        else []
    )
    return [DEFAULT] + [t for t in found if t != DEFAULT]
