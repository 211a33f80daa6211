"""Bearer tokens for MCP over HTTP: each token maps to one tenant.

The tokens file (``qortex mcp --http HOST:PORT --tokens FILE``) has one ``TOKEN TENANT`` pair per
line; blank lines and lines starting with ``#`` are skipped. A token is at least 16 characters
with no whitespace, and names exactly one tenant (a tenant may have several tokens). Only the
tokens' SHA-256 digests are kept in memory. A request without a known token is refused with 401
before it reaches a tool; a tool reads only the tenant its caller's token maps to.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from qortex_core.errors import ConfigError
from qortex_core.storage.tenants import validate_tenant

MIN_TOKEN_CHARS = 16


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def parse_tokens(text: str, where: str = "tokens file") -> dict[str, str]:
    """Token digest -> tenant from the file's text.

    Raises:
        ConfigError: a line that is not ``TOKEN TENANT``, a short token, a bad tenant name, a
            token listed twice, or no token at all.
    """
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{where} line {number}: expected 'TOKEN TENANT'")
        token, tenant = parts
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{where} line {number}: a token needs {MIN_TOKEN_CHARS}+ characters")
        try:
            tenant = validate_tenant(tenant)
        except ConfigError as exc:
            raise ConfigError(f"{where} line {number}: {exc}") from None
        if _digest(token) in found:
            raise ConfigError(f"{where} line {number}: this token is listed twice")
        found[_digest(token)] = tenant
    if not found:
        raise ConfigError(f"{where} lists no token: add lines 'TOKEN TENANT'")
    return found


def read_tokens(path: str | Path) -> dict[str, str]:
    """:func:`parse_tokens` of the file at ``path``.

    Raises:
        ConfigError: the file cannot be read, or holds a bad line.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read tokens file {path}: {getattr(exc, 'strerror', exc)}"
        ) from None
    return parse_tokens(text, str(path))


class TenantTokens:
    """The MCP SDK's ``TokenVerifier``: a known token is an access token carrying its tenant."""

    def __init__(self, digests: dict[str, str]) -> None:
        self._tenants = dict(digests)

    async def verify_token(self, token: str) -> AccessToken | None:
        tenant = self._tenants.get(_digest(token))
        if tenant is None:
            return None
        return AccessToken(
            token=token,
            client_id=f"tenant:{tenant}",
            scopes=[],
            subject=tenant,
            claims={"tenant": tenant},
        )
