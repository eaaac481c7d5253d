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

A JSON member under a secret-looking name loses its whole value, whatever it holds (a number, a
list, an object, a string with escaped quotes): the value is parsed, not matched.

>>> redact('{"token": ["a", {"b": 1}], "db_password": "x\\\\"y", "n": 1}')
'{"token": "[REDACTED]", "db_password": "[REDACTED]", "n": 1}'

Where the value is already parsed (args, a request body), :func:`mask_secrets` walks it instead of
its text: a key with a secret-looking name masks its value, whatever its type, and every other
string goes through :func:`redact`.

>>> mask_secrets({"host": "db", "Api-Key": 42, "opts": [{"password": ["x"]}]})
{'host': 'db', 'Api-Key': '[REDACTED]', 'opts': [{'password': '[REDACTED]'}]}
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["REDACTED", "is_secret_name", "mask_secrets", "redact"]

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


# A key of a JSON object (a JSON string, escapes included) and the colon after it.
_JSON_KEY = re.compile(r'"((?:[^"\\\r\n]|\\.){1,256})"\s*:\s*')
# What is masked of a value that does not parse (a line cut inside it): a string up to its
# closing quote (escapes included), anything else up to the end of the line.
_UNPARSED_VALUE = re.compile(r'"(?:[^"\\]|\\.)*"?|[^\r\n]*')
_DECODER = json.JSONDecoder()
_KEY_END = re.compile(r'"\s*:')


def is_secret_name(name: str) -> bool:
    """Whether a key's value is a secret: its name ends with password, passwd, pwd, secret,
    token, api key or credentials, or it is an ``Authorization`` or ``Cookie`` header."""
    return bool(_SECRET_KEY.fullmatch(name))


_SECRET_KEY = re.compile(rf"(?i){_SECRET_NAME}|(?:proxy[-_])?authorization|(?:set[-_])?cookie")


def redact(text: str) -> str:
    """``text`` with the values of recognisable secrets replaced by ``[REDACTED]``."""
    if not text:
        return text
    text = _redact_json_members(text)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


def mask_secrets(value: Any) -> Any:
    """A copy of the parsed JSON ``value`` with the value of every secret-looking key replaced by
    ``[REDACTED]`` whatever its type (string, number, list, object, null), at any depth, and
    every other string (keys included) passed through :func:`redact`."""
    if isinstance(value, dict):
        return {
            redact(str(key)): REDACTED if is_secret_name(str(key)) else mask_secrets(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [mask_secrets(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(value if isinstance(value, str) else str(value))


def _redact_json_members(text: str) -> str:
    """Every ``"secret-looking key": value`` in ``text`` with its whole value, parsed as JSON,
    replaced by ``"[REDACTED]"``; a value that does not parse is masked as far as it goes."""
    if not _KEY_END.search(text):  # no key at all: most lines
        return text
    out: list[str] = []
    done = 0
    found = _JSON_KEY.search(text)
    while found is not None:
        start = found.end()
        if not is_secret_name(_json_string(found.group(1))):
            found = _JSON_KEY.search(text, start)
            continue
        try:
            end = _DECODER.raw_decode(text, start)[1]
        except ValueError:
            matched = _UNPARSED_VALUE.match(text, start)
            end = matched.end() if matched else len(text)
        out.append(text[done:start])
        out.append(f'"{REDACTED}"')
        done = end
        found = _JSON_KEY.search(text, end)
    out.append(text[done:])
    return "".join(out)


def _json_string(body: str) -> str:
    """The text of a JSON string's body (its escapes decoded); the body itself when it is not
    valid JSON."""
    if "\\" not in body:
        return body
    try:
        decoded = json.loads(f'"{body}"')
    except ValueError:
        return body
    return decoded if isinstance(decoded, str) else body
