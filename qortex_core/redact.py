"""Secret redaction: API keys, bearer tokens, private-key blocks and URL passwords removed from text.

Runs on every source document's text as it is read (see
:func:`qortex_core.documents.read_document`), so no secret reaches the documents
or chunks tables, an extractor (local or an external LLM), an embedding, a
snapshot or a log. On by default; :class:`RedactionConfig` turns it off or adds
patterns.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from qortex_core.errors import ConfigError

MARK = "[REDACTED]"

_KEY_BLOCK = re.compile(  # a complete block, or an unterminated one up to the end of its string
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|[^\"]*)", re.S)
_URL_PASSWORD = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@\"'<>]+):([^\s@/\"'<>]+)@")
_ASSIGNMENT = re.compile(
    r"(?i)\b((?:[a-z0-9]+[_\-])*(?:api[_\-]?key|apikey|secret(?:[_\-]?key)?|access[_\-]?token|auth[_\-]?token|token"
    r"|password|passwd|pwd|client[_\-]?secret|private[_\-]?key))(\"?'?\s*[:=]\s*)([\"']?)([^\s\"',;]{6,})")
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9\-._~+/]{16,}=*)")
_TOKENS = tuple(re.compile(p) for p in (
    r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic, Stripe-style keys
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
    r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
    r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JSON web tokens
))


@dataclass(frozen=True)
class RedactionConfig:
    """Whether to redact, and any extra patterns (regular expressions; each whole match is replaced).

    Raises:
        ConfigError: an extra pattern is not a valid regular expression.
    """

    enabled: bool = True
    extra_patterns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for pattern in self.extra_patterns:
            try:
                _compiled(pattern)
            except re.error as exc:
                raise ConfigError(f"bad redaction pattern {pattern!r}: {exc}") from None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def redact(text: str, config: RedactionConfig = RedactionConfig()) -> str:
    """``text`` with every secret replaced by :data:`MARK` (keys and user names of assignments and URLs kept)."""
    if not config.enabled or not text:
        return text
    out = _KEY_BLOCK.sub("[REDACTED PRIVATE KEY]", text)
    out = _URL_PASSWORD.sub(r"\1:***@", out)
    for pattern in _TOKENS:
        out = pattern.sub(MARK, out)
    out = _BEARER.sub(lambda m: m.group(0) if m.group(3) == MARK else f"{m.group(1)}{m.group(2)}{MARK}", out)
    out = _ASSIGNMENT.sub(lambda m: m.group(0) if MARK in m.group(4) else "".join(m.group(1, 2, 3)) + MARK, out)
    for pattern in config.extra_patterns:
        out = _compiled(pattern).sub(MARK, out)
    return out


def has_secret(text: str, config: RedactionConfig = RedactionConfig()) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text, RedactionConfig(True, config.extra_patterns)) != text
