"""Secret redaction: API keys, bearer tokens, private-key blocks and URL passwords removed from text.

Runs on every source document's text as it is read (see
:func:`qortex_core.ingest.documents.read_document`), so no secret reaches the documents
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

# Every repetition that can run long is bounded or anchored on a literal, so a pathological text
# (say, a megabyte of "a-a-a-...") costs linear time, not quadratic.
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----")
_URL_PASSWORD = re.compile(
    r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,30}://[^\s:/@\"'<>]{1,128}):([^\s@/\"'<>]{1,256})@"
)
_ASSIGNMENT = re.compile(  # the name's prefix (OPENAI_, db_) is left in place, so no unbounded prefix match
    r"(?i)(api[_\-]?key|apikey|secret(?:[_\-]?key)?|access[_\-]?token|auth[_\-]?token|token"
    r"|password|passwd|pwd|client[_\-]?secret|private[_\-]?key)(\"?'?\s{0,8}[:=]\s{0,8})([\"']?)([^\s\"',;]{6,})"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)([A-Za-z0-9\-._~+/]{16,}=*)")
_TOKENS = tuple(
    re.compile(p)
    for p in (
        r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic, Stripe-style keys
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
        r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
        r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
        r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JSON web tokens
    )
)


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


def _redact_key_blocks(text: str) -> str:
    """Private-key blocks replaced; an unterminated block runs to the end of its string (a quote) or the text."""
    out: list[str] = []
    pos, no_end = 0, False
    while (begin := _KEY_BEGIN.search(text, pos)) is not None:
        end = None if no_end else _KEY_END.search(text, begin.end())
        no_end = (
            end is None
        )  # once no END follows, none follows a later BEGIN either: search once (linear)
        if end is not None:
            stop = end.end()
        else:
            quote = text.find('"', begin.end())
            stop = len(text) if quote < 0 else quote
        out += [text[pos : begin.start()], "[REDACTED PRIVATE KEY]"]
        pos = stop
    return "".join(out) + text[pos:] if out else text


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def redact(text: str, config: RedactionConfig = RedactionConfig()) -> str:
    """``text`` with every secret replaced by :data:`MARK` (keys and user names of assignments and URLs kept)."""
    if not config.enabled or not text:
        return text
    out = _redact_key_blocks(text)
    out = _URL_PASSWORD.sub(r"\1:***@", out)
    for pattern in _TOKENS:
        out = pattern.sub(MARK, out)
    out = _BEARER.sub(rf"\1\2{MARK}", out)
    out = _ASSIGNMENT.sub(
        lambda m: m.group(0) if MARK in m.group(4) else "".join(m.group(1, 2, 3)) + MARK, out
    )
    for pattern in config.extra_patterns:
        out = _compiled(pattern).sub(MARK, out)
    return out


def has_secret(text: str, config: RedactionConfig = RedactionConfig()) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text, RedactionConfig(True, config.extra_patterns)) != text
