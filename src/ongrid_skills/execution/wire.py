"""A child's stdout → the call's result: collection under the cap, then decoding (SPEC §4).

Owns the stdout half of the wire protocol: stdout is collected up to 16 MiB (one byte more and
the call is ``output_too_large``), and once the child exited 0 it must be exactly one strict JSON
value (UTF-8, no ``NaN``/``Infinity``). The result is handed on verbatim: ``text`` is the bytes
the skill wrote with surrounding whitespace trimmed, never a re-serialisation of ``value``.

It must never read a pipe, touch a process or look at the exit status: the runner feeds it what
it drained and asks for a verdict only when the child ended cleanly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ongrid_skills.execution.masking import Masker
from ongrid_skills.execution.records import ErrorInfo

STDOUT_CAP = 16 * 1024 * 1024


class StdoutBuffer:
    """stdout as collected so far; refuses the chunk that would take it past ``cap``.

    ``masker``: the call's secrets, masked out of what it wrote before anyone reads it."""

    __slots__ = ("cap", "data", "masker", "too_large")

    def __init__(self, cap: int = STDOUT_CAP, masker: Masker | None = None) -> None:
        self.cap = cap
        self.masker = masker
        self.data = bytearray()
        self.too_large = False

    def take(self, chunk: bytes) -> bool:
        """Append ``chunk``; False (and ``too_large`` set) when it would pass the cap."""
        if len(self.data) + len(chunk) > self.cap:
            self.too_large = True
            return False
        self.data += chunk
        return True

    def room(self) -> int:
        """How many more bytes it takes to know whether stdout passes the cap (one past it)."""
        return self.cap - len(self.data) + 1

    def masked(self) -> bytes:
        """What was collected, every secret of the call replaced by ``***``."""
        data = bytes(self.data)
        return data if self.masker is None else self.masker.mask(data)

    def overflow(self) -> ErrorInfo:
        """The error of a call whose stdout passed the cap."""
        return ErrorInfo("output_too_large", f"stdout exceeded {self.cap} bytes")


@dataclass(frozen=True, slots=True)
class Decoded:
    """stdout as a result: ``value`` and its verbatim ``text``, or the ``error`` saying why not."""

    value: Any = None
    text: str | None = None
    error: ErrorInfo | None = None


def decode_result(stdout: bytes, masker: Masker | None = None) -> Decoded:
    """Decode what a cleanly exited child wrote: one strict JSON value, kept verbatim.

    With a ``masker`` (``stdout`` already masked), strings that decode to a secret (escapes a
    byte search cannot see, ``\\u0073…``) are masked too, and the text is then the masked value
    re-serialised: the verbatim text would still hold the escaped secret."""
    raw = stdout.strip()
    if not raw:
        return Decoded(error=ErrorInfo("empty_output", "the skill wrote nothing on stdout"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Decoded(error=ErrorInfo("invalid_output", f"stdout is not UTF-8 (byte {exc.start})"))
    try:  # the C scanner alone: stripped, the text has no whitespace left around the value
        value, end = _SCAN(text, 0)
    except Exception:  # the full decode below says what is wrong
        end = -1
    try:
        if end != len(text):  # not one JSON value: the decoder's own error says why
            if text.startswith("\ufeff"):  # what json.loads says; the decoder would not
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
            value = _DECODER.decode(text)
    except _NotJson as exc:
        return Decoded(error=ErrorInfo("invalid_output", f"stdout is not valid JSON: {exc}"))
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        return Decoded(error=ErrorInfo("invalid_output", f"stdout is not valid JSON: {where}"))
    except RecursionError:
        return Decoded(error=ErrorInfo("invalid_output", "stdout JSON is nested too deeply"))
    if masker is not None:
        masked, changed = masker.mask_value(value)
        if changed:
            return Decoded(masked, json.dumps(masked, ensure_ascii=False))
    return Decoded(value, text)


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value")


# One decoder for every call: json.loads with a keyword builds a new one (and its scanner) each
# time, a few µs on every call's critical path.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
# Its scanner alone (C): decode() around it adds two regular-expression matches for whitespace.
_SCAN: Callable[[str, int], tuple[Any, int]] = vars(_DECODER)["scan_once"]


__all__ = ["STDOUT_CAP", "Decoded", "StdoutBuffer", "decode_result"]
