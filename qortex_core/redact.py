"""Secret redaction: detect-secrets' detectors plus a few of qortex's own, replaced in place.

Runs on every source document's text as it is read (JSON corpora after decoding, so escaped
slashes and ``\\u`` escapes cannot hide a secret), on file names, on agent writes and on a
query before any LLM sees it, so no secret reaches the tables, an extractor, an embedding,
a snapshot or a log. What is found:

- detect-secrets' regex plugins (AWS, Azure storage, GitHub, GitLab, Slack, Stripe, Twilio,
  SendGrid, npm, PyPI, JWT, OpenAI, Discord, Mailchimp, Square, Telegram, basic-auth URLs) and
  its keyword assignments (``password=``, ``secret:``, ``DB_PASS=``, ``aws_secret_access_key =``);
- qortex's own: private-key blocks, URL passwords with or without a user (``redis://:pw@h``),
  ``Authorization:`` / bearer headers, ``sk-``/``hf_``/``xox`` tokens, ``token =`` assignments;
- high-entropy strings: 20+ characters of the base64/url-safe alphabet with a digit, mixing at
  least three of lower case, upper case, digits and symbols, not part of a longer word, with
  Shannon entropy >= ``entropy_limit`` (lower for short tokens); pure hex such as content
  hashes and UUIDs is left alone (it rarely is a credential on its own).

A keyword assignment's value is cut at the first space, so prose after ``secret:`` survives.

Structured values (a memory's metadata) go through :func:`redact_json`: every key and string is
redacted like text, and every value under a key that names a secret (``db_password``,
``apiKey``, ``auth``) is replaced whole, however short.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

from detect_secrets.plugins import (
    aws,
    azure_storage_key,
    basic_auth,
    discord,
    github_token,
    gitlab_token,
    jwt,
    keyword,
    mailchimp,
    npm,
    openai,
    pypi_token,
    sendgrid,
    slack,
    square_oauth,
    stripe,
    telegram_token,
    twilio,
)

from qortex_core.errors import ConfigError

MARK = "[REDACTED]"
_WINDOW = 2000  # keyword patterns run on pieces of at most this many characters (linear time)

# Every repetition that can run long is bounded or anchored on a literal, so a pathological text
# (say, a megabyte of "a-a-a-...") costs linear time, not quadratic.
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY( BLOCK)?-----")
_URL_PASSWORD = re.compile(
    r"\b([a-zA-Z][a-zA-Z0-9+.\-]{0,30}(?::\\?/\\?/)[^\s:/@\"'<>\\]{0,128}):([^\s@/\"'<>]{1,256})@"
)
_ASSIGNMENT = re.compile(  # the name's prefix (OPENAI_, db_) is left in place
    r"(?i)(api[_\-]?key|apikey|secret(?:[_\-]?key)?|access[_\-]?token|auth[_\-]?token|token"
    r"|password|passwd|pwd|client[_\-]?secret|private[_\-]?key)"
    r"(\"?'?\s{0,8}[:=]\s{0,8})([\"']?)([^\s\"',;]{6,})"
)
_BEARER = re.compile(
    r"(?i)(\b(?:bearer|basic|token|digest)|authorization\s{0,4}[:=])(\s+)([A-Za-z0-9\-._~+/]{12,}=*)"
)
_TOKENS = tuple(
    re.compile(p)
    for p in (
        r"\b[sr]k[-_](?:proj-|ant-|live_?|test_?)?[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic, Stripe
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
        r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",  # GitHub tokens
        r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
        r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
        r"\bAIza[0-9A-Za-z_\-]{35}\b",  # Google API keys
        r"\bhf_[A-Za-z0-9]{30,}\b",  # Hugging Face tokens
        r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JSON web tokens
    )
)
_PLUGINS = (
    aws.AWSKeyDetector,
    azure_storage_key.AzureStorageKeyDetector,
    basic_auth.BasicAuthDetector,
    discord.DiscordBotTokenDetector,
    github_token.GitHubTokenDetector,
    gitlab_token.GitLabTokenDetector,
    jwt.JwtTokenDetector,
    mailchimp.MailchimpDetector,
    npm.NpmDetector,
    openai.OpenAIDetector,
    pypi_token.PypiTokenDetector,
    sendgrid.SendGridDetector,
    slack.SlackDetector,
    square_oauth.SquareOAuthDetector,
    stripe.StripeDetector,
    telegram_token.TelegramBotTokenDetector,
    twilio.TwilioKeyDetector,
)
# detect-secrets patterns whose first group is the secret (the rest of the match is context)
_GROUP_IS_SECRET = {basic_auth.BasicAuthDetector, npm.NpmDetector}
_KEYWORD_PATTERNS = {
    **keyword.CONFIG_DENYLIST_REGEX_TO_GROUP,
    **keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
}
_SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "apikey",
    "privatekey",
    "accesskey",
    "credential",
    "authorization",
    "cookie",
    "accesstoken",
    "authtoken",
    "apitoken",
    "refreshtoken",
    "bearertoken",
    "sessiontoken",
    "csrftoken",
)  # anywhere in the key (``db_password``); "tokens_used" or "session_id" are not secrets
_SECRET_KEY_WORDS = frozenset({"pass", "pwd", "pin", "auth", "otp", "cvv", "token"})  # whole
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-]{20,512}")
_HEX = re.compile(r"[0-9a-fA-F\-]+")


@dataclass(frozen=True)
class RedactionConfig:
    """Whether to redact, extra patterns (each whole match replaced) and the entropy limit.

    Raises:
        ConfigError: an extra pattern is not a valid regular expression, or the limit is not in
            [0, 8] bits per character.
    """

    enabled: bool = True
    extra_patterns: tuple[str, ...] = ()
    entropy_limit: float = 4.0

    def __post_init__(self) -> None:
        for pattern in self.extra_patterns:
            try:
                _compiled(pattern)
            except re.error as exc:
                raise ConfigError(f"bad redaction pattern {pattern!r}: {exc}") from None
        if not 0.0 <= self.entropy_limit <= 8.0:
            raise ConfigError(f"entropy_limit must be in [0, 8], got {self.entropy_limit}")


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _redact_key_blocks(text: str) -> str:
    """Private-key blocks replaced; an unterminated block runs to its string's end (a quote)."""
    out: list[str] = []
    pos, no_end = 0, False
    while (begin := _KEY_BEGIN.search(text, pos)) is not None:
        end = None if no_end else _KEY_END.search(text, begin.end())
        no_end = end is None  # once no END follows, none follows a later BEGIN either (linear)
        if end is not None:
            stop = end.end()
        else:
            quote = text.find('"', begin.end())
            stop = len(text) if quote < 0 else quote
        out += [text[pos : begin.start()], "[REDACTED PRIVATE KEY]"]
        pos = stop
    return "".join(out) + text[pos:] if out else text


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with every (start, end) span replaced by :data:`MARK` (overlaps merged)."""
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        if end <= pos:
            continue
        start = max(start, pos)
        out += [text[pos:start], MARK]
        pos = end
    return "".join(out) + text[pos:]


def _plugin_spans(text: str) -> Iterator[tuple[int, int]]:
    """Spans of the secrets detect-secrets' regex plugins find."""
    for plugin in _PLUGINS:
        for pattern in plugin.denylist:
            group = 1 if plugin in _GROUP_IS_SECRET or "aws.{0,20}" in pattern.pattern else 0
            for m in pattern.finditer(text):
                if m.group(group) and MARK not in m.group(group) and m.group(group) != "***":
                    yield m.span(group)


def _windows(text: str) -> Iterator[tuple[int, str]]:
    """(offset, piece) of ``text``: lines, long lines cut at a space (else hard) every window."""
    pos = 0
    for line in text.splitlines(keepends=True):
        start = 0
        while len(line) - start > _WINDOW:
            cut = line.rfind(" ", start + 1, start + _WINDOW)
            cut = cut if cut > start else start + _WINDOW
            yield pos + start, line[start:cut]
            start = cut
        yield pos + start, line[start:]
        pos += len(line)


def _keyword_spans(text: str) -> Iterator[tuple[int, int]]:
    """Values of keyword assignments (detect-secrets' keyword plugin), cut at the first space."""
    for offset, piece in _windows(text):
        if ":" not in piece and "=" not in piece:
            continue
        for pattern, group in _KEYWORD_PATTERNS.items():
            for m in pattern.finditer(piece):
                value = m.group(group).split()[0] if m.group(group).split() else ""
                colon = ":" in m.group(0)[: m.start(group) - m.start()] and "=" not in m.group(0)
                short = len(value) < (8 if colon else 4) and not re.search(r"[\d\W_]", value)
                if not value or MARK in value or short:
                    continue
                start = offset + m.start(group)
                yield start, start + len(value)


def entropy(token: str) -> float:
    """Shannon entropy of ``token`` in bits per character."""
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _entropy_spans(text: str, limit: float) -> Iterator[tuple[int, int]]:
    """Random-looking tokens: 20+ characters, a digit, three classes, entropy >= ``limit``."""
    for m in _CANDIDATE.finditer(text):
        token = m.group(0).strip("=-_/")
        if len(token) < 20 or _HEX.fullmatch(token):
            continue
        classes = (
            any(c.islower() for c in token)
            + any(c.isupper() for c in token)
            + any(c.isdigit() for c in token)
            + any(c in "+/=_-" for c in token)
        )
        inside_word = any(
            0 <= i < len(text) and text[i].isalnum() for i in (m.start() - 1, m.end())
        )  # a non-ASCII letter next to it: a word, not a key
        has_digit = any(c.isdigit() for c in token)
        bar = min(limit, 0.88 * math.log2(len(token)))  # a short token cannot reach a high limit
        if classes >= 3 and has_digit and not inside_word and entropy(token) >= bar:
            yield m.span()


def redact(text: str, config: RedactionConfig = RedactionConfig()) -> str:
    """``text`` with every secret replaced by :data:`MARK` (names and URL user names kept)."""
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
    out = _replace_spans(out, list(_plugin_spans(out)) + list(_keyword_spans(out)))
    out = _replace_spans(out, list(_entropy_spans(out, config.entropy_limit)))
    for extra in config.extra_patterns:
        out = _compiled(extra).sub(MARK, out)
    return out


def has_secret(text: str, config: RedactionConfig = RedactionConfig()) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text, RedactionConfig(True, config.extra_patterns, config.entropy_limit)) != text


def secret_key(name: str) -> bool:
    """Whether a key (``db_password``, ``apiKey``, ``X-Auth``) names a secret."""
    words = re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower())
    joined = "".join(words)
    return any(p in joined for p in _SECRET_KEY_PARTS) or any(w in _SECRET_KEY_WORDS for w in words)


def redact_json(value: object, config: RedactionConfig = RedactionConfig(), secret: bool = False):
    """A JSON value (dicts, lists, scalars) with secrets redacted: keys and strings as text, and
    every number or string under a key that names a secret (:func:`secret_key`) replaced whole.

    The caller bounds the nesting (recursion follows it).
    """
    if not config.enabled:
        return value
    if isinstance(value, dict):
        return {
            redact(k, config): redact_json(v, config, secret or secret_key(k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_json(v, config, secret) for v in value]
    if secret and value is not None and not isinstance(value, bool):
        return MARK
    return redact(value, config) if isinstance(value, str) else value
