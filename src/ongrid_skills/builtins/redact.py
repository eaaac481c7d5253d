"""Secrets out of what the built-ins show: command lines, journal messages, log lines.

A person types ``ongrid-skills approvals approve --token ogs_…`` and the process table shows it to
every viewer; a service logs its DSN with the password. :func:`redact` replaces the values of
what looks like a secret by ``[REDACTED]`` and keeps the rest, so the line still says what
happened. It is a safety net for text the product does not control, not a guarantee: a secret
with no recognisable shape passes.

>>> redact("ongrid-skills approvals approve 1f2 --token ogs_abcdefghijklmnopqrstuvwxyz012345")
'ongrid-skills approvals approve 1f2 --token [REDACTED]'
>>> redact("auth ok with ogs_AbCdEfGhIjKlMnOpQrStUv_-12")
'auth ok with ogs_[REDACTED]'
>>> redact("psql postgresql://app:hunter2@db/app password=hunter2 user=app")
'psql postgresql://app:[REDACTED]@db/app password=[REDACTED] user=app'
>>> redact("curl -H 'Authorization: Bearer abc.def' https://x")
"curl -H 'Authorization: [REDACTED]' https://x"
>>> redact('{"api_key": "k-123", "user": "ada"}')
'{"api_key": "[REDACTED]", "user": "ada"}'
>>> redact("nothing secret here: tokenizer loaded")
'nothing secret here: tokenizer loaded'
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact"]

REDACTED = "[REDACTED]"

# Names whose value is a secret: they *end* with password, passwd, pwd, secret, token, api key or
# credentials (DB_PASSWORD, --access-token, "client_secret"), so --tokens-per-second is no secret.
_SECRET_NAME = r"[\w.-]*?(?:passw(?:or)?d|pwd|secret|token|api[-_]?key|credentials?)"  # noqa: S105

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization headers (curl -H, logged requests): the scheme and the credentials.
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)[^\"'\r\n]+"),
        rf"\g<1>{REDACTED}",
    ),
    (
        re.compile(r"(?i)\b((?:x-)?(?:api-key|auth-token|access-token)\s*:\s*)[^\s\"',;]+"),
        rf"\g<1>{REDACTED}",
    ),
    # Options: --token X, --token=X, -password X, --db-password=X…
    (
        re.compile(rf"(?i)(?<![\w-])(--?{_SECRET_NAME})(=|\s+)(?!-)[^\s\"']+"),
        rf"\g<1>\g<2>{REDACTED}",
    ),
    # JSON members: "password": "x"
    (
        re.compile(rf"(?i)(\"{_SECRET_NAME}\"\s*:\s*\")[^\"]*"),
        rf"\g<1>{REDACTED}",
    ),
    # key=value pairs: password=x, DB_PASSWORD='x', access_token=x&…
    (
        re.compile(rf"(?i)(?<![\w.-])({_SECRET_NAME}\s*=\s*)(\"[^\"]*\"|'[^']*'|[^\s&;,\"']+)"),
        rf"\g<1>{REDACTED}",
    ),
    # Credentials in URLs: scheme://user:password@host
    (
        re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+(@)"),
        rf"\g<1>{REDACTED}\g<2>",
    ),
    # The product's own tokens, wherever they stand.
    (re.compile(r"\bogs_[A-Za-z0-9_-]{8,}"), f"ogs_{REDACTED}"),
)


def redact(text: str) -> str:
    """``text`` with the values of recognisable secrets replaced by ``[REDACTED]``."""
    if not text:
        return text
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text
