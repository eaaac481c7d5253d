"""Masking: the secrets injected into a call never leave the runner in what the child wrote.

A :class:`Masker` is built per call from the values of the credentials the call was given. The
runner passes every byte of the child's stdout and stderr through it before any consumer (the
timeline, the result, the store, the doors, the model) sees them, so ``***`` is all they get.

Each value is looked for in the forms a skill commonly prints it in:

- as written (UTF-8);
- JSON-escaped (``\\"``, ``\\u00e9``…), as it sits inside a JSON string;
- URL-encoded (``quote`` with and without ``/`` kept, ``quote_plus``; upper and lower hex);
- base64, standard and URL-safe, at the three alignments it can have inside a longer encoded
  text (``user:secret`` in a Basic header): the characters that depend on the value alone.

What it cannot catch is said plainly in docs/security.md: a value transformed any other way
(hex, reversed, encrypted, split across two lines, one character per line).

Values shorter than :data:`MIN_SECRET_LENGTH` are refused when a credential is created: a short
value would mask ordinary text and still leak by elimination.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

MIN_SECRET_LENGTH = 6
MASK = "***"
_MASK_BYTES = MASK.encode()
_PERCENT = re.compile(r"%[0-9A-F]{2}")
_HTML = re.compile(r"[&<>]")
_UNICODE = re.compile(r"\\u[0-9a-f]{4}")


def _base64_forms(raw: bytes) -> set[bytes]:
    """The characters of ``raw``'s base64 that do not depend on what surrounds it."""
    forms: set[bytes] = set()
    for offset in range(3):
        padded = b"\0" * offset + raw
        first = -(-offset * 8 // 6)  # the first character made of the value's bits only
        last = len(padded) * 8 // 6  # past the last character made of whole bits
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            piece = encode(padded)[first:last]
            if len(piece) >= MIN_SECRET_LENGTH:
                forms.add(piece)
    return forms


def _json_forms(secret: str) -> set[str]:
    """The value inside a JSON string as common encoders write it: Python's (ASCII or not),
    with ``\\/`` (PHP), with ``&<>`` as ``\\u0026`` (Go), with upper-case hex (.NET)."""
    forms = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    for form in list(forms):
        forms.add(form.replace("/", "\\/"))
        forms.add(_HTML.sub(lambda m: f"\\u{ord(m.group(0)):04x}", form))
        forms.add(_UNICODE.sub(lambda m: m.group(0).upper().replace("\\U", "\\u"), form))
    return forms


def forms_of(secret: str) -> set[bytes]:
    """Every form of ``secret`` that is masked, as bytes. A value on several lines (a key, a
    kubeconfig) is also masked line by line: output is read a line at a time.

    >>> sorted(f.decode() for f in forms_of("p@ss/wörd"))[:4]
    ['BAc3Mvd8O2cm', 'cEBzcy93w7ZyZ', 'p%40ss%2Fw%C3%B6rd', 'p%40ss%2fw%c3%b6rd']
    """
    forms = {secret} | _json_forms(secret)
    for encoded in (
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        quote(secret, safe="!'()*~"),  # JavaScript's encodeURIComponent
    ):
        forms.add(encoded)
        forms.add(_PERCENT.sub(lambda m: m.group(0).lower(), encoded))
    found = {form.encode() for form in forms if form}
    found |= _base64_forms(secret.encode())
    if "\n" in secret:
        for piece in (line.strip() for line in secret.splitlines()):
            if len(piece) >= MIN_SECRET_LENGTH:
                found |= forms_of(piece)
    return found


class Masker:
    """Replaces every form of the given secrets with ``***`` in bytes, text and JSON values."""

    __slots__ = ("_bytes", "_forms", "_longest", "_text")

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[bytes] = set()
        for secret in secrets:
            if len(secret) < MIN_SECRET_LENGTH:
                raise ValueError(
                    f"a secret of {len(secret)} characters cannot be masked safely "
                    f"(at least {MIN_SECRET_LENGTH})"
                )
            forms |= forms_of(secret)
        if not forms:
            raise ValueError("a masker needs at least one secret")
        ordered = sorted(forms, key=len, reverse=True)  # the longest form wins an overlap
        self._forms = tuple(ordered)
        self._longest = len(ordered[0])
        self._bytes = re.compile(b"|".join(re.escape(form) for form in ordered))
        self._text = re.compile("|".join(re.escape(f.decode("utf-8", "replace")) for f in ordered))

    @classmethod
    def of(cls, secrets: Iterable[str]) -> Masker | None:
        """A masker for ``secrets``, or None when there is none (nothing to do per byte)."""
        values = [s for s in secrets if s]
        return cls(values) if values else None

    @property
    def longest(self) -> int:
        """The length in bytes of the longest form: how much a stream must hold back."""
        return self._longest

    def mask(self, data: bytes) -> bytes:
        """``data`` with every form replaced by ``***``."""
        return self._bytes.sub(_MASK_BYTES, data)

    def mask_text(self, text: str) -> str:
        return self._text.sub(MASK, text)

    def cut(self, data: bytes, limit: int) -> bytes:
        """The first ``limit`` bytes of masked ``data``, without the start of a form at the
        cut (a value cut in two would leak its first half)."""
        masked = self.mask(data)
        if len(masked) <= limit:
            return masked
        head = masked[:limit]
        for keep in range(max(0, limit - self._longest + 1), limit):
            tail = head[keep:]
            if any(form.startswith(tail) for form in self._forms):
                return head[:keep]
        return head

    def tail(self, data: bytes, limit: int, *, cut: bool = False) -> bytes:
        """The last ``limit`` bytes of masked ``data``, without the end of a form at its start:
        ``data`` may itself start inside a value (``cut``: it is the end of a longer output)."""
        masked = self.mask(data)
        if len(masked) <= limit and not cut:
            return masked
        tail = masked[-limit:]
        for drop in range(min(self._longest, len(tail)), 0, -1):
            if any(form.endswith(tail[:drop]) for form in self._forms):
                return tail[drop:]
        return tail

    def mask_value(self, value: Any) -> tuple[Any, bool]:
        """``value`` (decoded JSON) with every string masked, keys included; and whether
        anything changed. A skill may escape characters a byte search cannot see (``\\u0073``)."""
        if isinstance(value, str):
            masked = self.mask_text(value)
            return masked, masked != value
        if isinstance(value, list):
            changed = False
            items = []
            for item in value:
                new, hit = self.mask_value(item)
                items.append(new)
                changed = changed or hit
            return (items, True) if changed else (value, False)
        if isinstance(value, dict):
            changed = False
            pairs = {}
            for key, item in value.items():
                new_key, key_hit = self.mask_value(key)
                new, hit = self.mask_value(item)
                pairs[new_key] = new
                changed = changed or key_hit or hit
            return (pairs, True) if changed else (value, False)
        return value, False


__all__ = ["MASK", "MIN_SECRET_LENGTH", "Masker", "forms_of"]
