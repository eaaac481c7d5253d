"""Execution records and their timeline events.

The plain data of one call: the :class:`Execution` that the API, the CLI and the store show, its
:class:`Status`, the :class:`Event` entries of its timeline and its :class:`ErrorInfo`. Data only:
it must never do I/O or import anything of ours.
"""

from __future__ import annotations

import enum
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class Status(enum.StrEnum):
    """Where a call stands; every status but ``pending_approval`` and ``running`` is final."""

    PENDING_APPROVAL = "pending_approval"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    INVALID_ARGS = "invalid_args"
    OUTPUT_TOO_LARGE = "output_too_large"
    CANCELLED = "cancelled"
    DENIED = "denied"
    REJECTED = "rejected"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"

    @property
    def final(self) -> bool:
        """Whether the call has ended: nothing changes its row any more."""
        return self not in (Status.PENDING_APPROVAL, Status.RUNNING)


@dataclass(frozen=True, slots=True)
class Event:
    """One timeline entry. ``type``: status, stderr, stderr_truncated, progress, …"""

    type: str
    data: dict[str, Any]
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        """The event as the API shows it: its type, its ISO time, then its fields."""
        return {"type": self.type, "ts": iso(self.ts), **self.data}


EventSink = Callable[[Event], None]


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """The ``error`` of an Execution: a stable code, a message, and details for invalid args."""

    code: str
    message: str
    details: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            out["details"] = self.details
        return out


def new_id() -> str:
    """A fresh random id, 32 hex digits (executions, approvals, tokens)."""
    return uuid.uuid4().hex


def iso(ts: float | None) -> str | None:
    """UNIX seconds as ISO 8601 UTC with milliseconds and a ``Z``; None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Execution:
    """One call of a skill and its outcome; ``result_text`` is the skill's stdout, verbatim."""

    skill: str
    args: Any
    id: str = field(default_factory=new_id)
    status: Status = Status.RUNNING
    result: Any = None
    result_text: str | None = None
    error: ErrorInfo | None = None
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    orphans_killed: int = 0
    persona: str | None = None
    requested_by: str | None = None
    approval_id: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    duration_ms: float | None = None
    # The credentials the call was given, slot -> credential name (names only, never a value).
    credentials: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.SUCCEEDED

    def to_dict(self) -> dict[str, Any]:
        """The Execution with its result parsed (:meth:`to_json` keeps the text verbatim)."""
        return {
            "id": self.id,
            "skill": self.skill,
            "status": self.status.value,
            "args": self.args,
            "result": self.result,
            "error": self.error.to_dict() if self.error else None,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stderr_tail": self.stderr_tail,
            "orphans_killed": self.orphans_killed,
            "persona": self.persona,
            "requested_by": self.requested_by,
            "approval_id": self.approval_id,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "duration_ms": self.duration_ms,
            **({"credentials": self.credentials} if self.credentials else {}),
        }

    def to_json(self) -> str:
        """The Execution as JSON text, its result spliced in verbatim (never re-serialised)."""
        body = self.to_dict()
        del body["result"]
        text = json.dumps(body, ensure_ascii=False)
        if self.result_text is None:
            return '{"result": null, ' + text[1:]
        return '{"result": ' + self.result_text + ", " + text[1:]

    def envelope(self) -> str:
        """What a model receives (SPEC §7): verbatim stdout, the error envelope, or pending."""
        if self.status is Status.SUCCEEDED and self.result_text is not None:
            return self.result_text
        if self.status is Status.PENDING_APPROVAL:
            return json.dumps({"status": "pending_approval", "approval_id": self.approval_id})
        error = self.error or ErrorInfo(self.status.value, self.status.value)
        return json.dumps(
            {
                "error": {"code": error.code, "message": error.message},
                "exit_code": self.exit_code,
                "stderr_tail": self.stderr_tail,
            },
            ensure_ascii=False,
        )
