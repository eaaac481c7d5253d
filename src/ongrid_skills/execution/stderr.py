"""A child's stderr → timeline events: line splitting, caps, budget and tail (SPEC §4).

Owns the stderr half of the wire protocol: bytes are split into lines as they arrive, a line
longer than 8 KiB is cut and marked ``truncated`` (its rest is skipped up to the next newline),
at most 1 MiB of stderr reaches the timeline (then one ``stderr_truncated`` event and silence),
and the last 4 KiB of raw stderr is kept as the call's ``stderr_tail``. A line that is a JSON
object with a numeric ``progress`` becomes a ``progress`` event instead of a ``stderr`` one.

It must never read a pipe, touch a process or decide a call's status: the runner feeds it the
bytes it drained and asks for the tail at the end.
"""

from __future__ import annotations

import json
from typing import Any

from ongrid_skills.execution.masking import Masker
from ongrid_skills.execution.records import Event, EventSink

LINE_CAP = 8 * 1024
STDERR_BUDGET = 1024 * 1024
TAIL_BYTES = 4 * 1024


class StderrTimeline:
    """Splits stderr into line events (8 KiB cap, 1 MiB budget) and keeps a 4 KiB tail."""

    __slots__ = (
        "_buf",
        "_dropped",
        "_emit",
        "_exhausted",
        "_keep",
        "_masker",
        "_sent",
        "_skipping",
        "_tail",
        "_trimmed",
    )

    def __init__(self, emit: EventSink, masker: Masker | None = None) -> None:
        """``masker``: the call's secrets, masked in every line and in the tail (a line is
        masked whole, so a secret written in pieces is still found once its line is complete)."""
        self._emit = emit
        self._masker = masker
        # The tail keeps the longest secret form more: masked, then cut to 4 KiB.
        self._keep = TAIL_BYTES + (masker.longest if masker is not None else 0)
        self._trimmed = False  # bytes were dropped from the front of the tail
        self._buf = bytearray()
        self._tail = bytearray()
        self._skipping = False
        self._sent = 0
        self._exhausted = False
        self._dropped = 0

    def feed(self, chunk: bytes) -> None:
        """Take the next bytes of stderr; emit an event for every line they complete."""
        self._tail += chunk
        if len(self._tail) > self._keep:
            del self._tail[: -self._keep]
            self._trimmed = True
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not self._skipping:
                    self._buf += chunk[start:]
                    if len(self._buf) > LINE_CAP:
                        self._line(self._cut(bytes(self._buf)), truncated=True)
                        self._buf.clear()
                        self._skipping = True
                return
            if self._skipping:
                self._skipping = False
            else:
                self._buf += chunk[start:nl]
                line = bytes(self._buf)
                self._buf.clear()
                if len(line) > LINE_CAP:
                    self._line(self._cut(line), truncated=True)
                else:
                    self._line(line)
            start = nl + 1

    def close(self) -> None:
        """stderr reached EOF: a last line without a newline is still a line."""
        if self._buf and not self._skipping:
            self._line(bytes(self._buf))
        self._buf.clear()

    def tail(self) -> str:
        """The last 4 KiB of stderr as received (decoded leniently), secrets masked."""
        if self._masker is None:
            return self._tail.decode("utf-8", "replace")
        tail = self._masker.tail(bytes(self._tail), TAIL_BYTES, cut=self._trimmed)
        return tail.decode("utf-8", "replace")

    def _cut(self, line: bytes) -> bytes:
        """The first 8 KiB of a line too long (masked first: a secret cut in two would leak)."""
        return line[:LINE_CAP] if self._masker is None else self._masker.cut(line, LINE_CAP)

    def _line(self, raw: bytes, truncated: bool = False) -> None:
        if self._masker is not None and not truncated:
            raw = _masked_line(self._masker, raw)
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if self._exhausted:
            self._dropped += len(raw)
            return
        if self._sent + len(raw) > STDERR_BUDGET:
            self._exhausted = True
            self._emit(Event("stderr_truncated", {"after_bytes": self._sent}))
            return
        self._sent += len(raw) + 1
        if raw[:1] == b"{" and b'"progress"' in raw:
            progress = _progress(raw)
            if progress is not None:
                if self._masker is not None and "message" in progress:  # escapes decoded
                    progress["message"] = self._masker.mask_text(progress["message"])
                self._emit(Event("progress", progress))
                return
        data: dict[str, Any] = {"line": raw.decode("utf-8", "replace")}
        if truncated:
            data["truncated"] = True
        self._emit(Event("stderr", data))


def _masked_line(masker: Masker, raw: bytes) -> bytes:
    """A line with the call's secrets masked; a JSON line is also decoded and its strings
    masked (an encoder may escape any character as ``\\uXXXX``: no byte search sees those)."""
    masked = masker.mask(raw)
    if masked[:1] in (b"{", b"["):
        try:
            value = json.loads(masked)
        except (ValueError, RecursionError):
            return masked
        value, changed = masker.mask_value(value)
        if changed:
            return json.dumps(value, ensure_ascii=False).encode()
    return masked


def _progress(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    value = obj.get("progress")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out: dict[str, Any] = {"progress": value}
    total = obj.get("total")
    if isinstance(total, int | float) and not isinstance(total, bool):
        out["total"] = total
    message = obj.get("message")
    if isinstance(message, str):
        out["message"] = message
    return out


__all__ = ["LINE_CAP", "STDERR_BUDGET", "TAIL_BYTES", "StderrTimeline"]
