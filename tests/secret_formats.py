"""One fresh secret per format the redactor must catch (issue 13 item 2, detect-secrets' plugins).

Values are random on every call, so finding one under a data home cannot be a coincidence.
``lines(s)`` writes each secret the way it appears in the wild (a config line, a URL, a header).
"""

from __future__ import annotations

import base64
import secrets
import string

_ALNUM = string.ascii_letters + string.digits


def _alnum(n: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


def _lower(n: int) -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def _nonce() -> str:
    """A random url-safe base64 nonce of 32 characters with a digit in it (the entropy rule
    looks for a digit; about 1 draw in 230 has none and would read as a word)."""
    while True:
        token = base64.urlsafe_b64encode(secrets.token_bytes(24)).decode().rstrip("=")
        if any(c.isdigit() for c in token):
            return token


def fresh() -> dict[str, str]:
    """Format name -> a fresh secret value."""
    b64 = base64.b64encode(secrets.token_bytes(30)).decode()  # 40 characters
    return {
        "aws_secret": b64,
        "aws_id": "AKIA" + "".join(secrets.choice(string.ascii_uppercase) for _ in range(16)),
        "redis_pw": "rpw" + _alnum(12),
        "stripe": "sk_live_" + _alnum(24),
        "hf": "hf_" + _alnum(34),
        "gitlab": "glpat-" + _alnum(20),
        "github": "ghp_" + _alnum(36),
        "slack": "xoxb-" + str(secrets.randbelow(10**10)) + "-" + _lower(24),
        "db_pass": "dbp" + _alnum(10),
        "auth_token": _alnum(32),
        "twilio": "SK" + _lower(32),
        "sendgrid": "SG." + _alnum(22) + "." + _alnum(43),
        "npm": "npm_" + _alnum(36),
        "pypi": "pypi-AgEIcHlwaS5vcmc" + _alnum(72),
        "azure": base64.b64encode(secrets.token_bytes(66)).decode(),  # 88 characters
        "jwt": "eyJ" + _alnum(20) + ".eyJ" + _alnum(30) + "." + _alnum(30),
        "basic_auth": "bpw" + _alnum(10),
        "keyword_colon": "kc" + _alnum(12),
        "keyword_quoted": "kq" + _alnum(12),
        "token_assign": "ta" + _alnum(14),
        "entropy": _nonce(),
        "key_body": "MIIE" + _alnum(40),
    }


def lines(s: dict[str, str]) -> list[str]:
    """Each secret in context, one per line (plain text, as a document or query would hold it)."""
    return [
        f"aws_secret_access_key = {s['aws_secret']}",
        f"The access key id is {s['aws_id']} for the Velmora account.",
        f"cache at redis://:{s['redis_pw']}@cache.velmora.example:6379/0",
        f"payments use {s['stripe']} in production",
        f"download with {s['hf']} from the hub",
        f"CI pushes with {s['gitlab']} nightly",
        f"clone with {s['github']} please",
        f"the bot posts with {s['slack']}",
        f"DB_PASS={s['db_pass']}",
        f"Authorization: Token {s['auth_token']}",
        f"twilio api key {s['twilio']}",
        f"mail via {s['sendgrid']}",
        f"//registry.npmjs.org/:_authToken={s['npm']}",
        f"upload with {s['pypi']}",
        f"DefaultEndpointsProtocol=https;AccountName=velmora;AccountKey={s['azure']}",
        f"session {s['jwt']}",
        f"see https://deploy:{s['basic_auth']}@ci.velmora.example/jobs",
        f"secret: {s['keyword_colon']}",
        f'password = "{s["keyword_quoted"]}"',
        f"token = {s['token_assign']}",
        f"the nonce {s['entropy']} was logged",
        f"-----BEGIN RSA PRIVATE KEY-----\n{s['key_body']}\n-----END RSA PRIVATE KEY-----",
    ]


def json_escaped(s: dict[str, str]) -> list[str]:
    """Secrets as JSON source text hides them: escaped slashes and ``\\u`` escapes (raw JSON)."""
    aws = "\\u0041" + s["aws_id"][1:]  # "A" written as \\u0041
    return [
        f"db at mysql:\\/\\/app:{s['db_pass']}@db.velmora.example\\/prod",
        f"key id {aws} for the nightly export",
    ]
