"""The typed events of an agent run: what every door follows (REST SSE, ``chat``, the console).

One frozen dataclass per kind, each with a ``kind`` discriminator and its ``ts``. In the run's
timeline and the store they are :class:`~ongrid_skills.execution.records.Event` records (``type``
= the kind, ``data`` = the fields below): :func:`to_event` and :func:`from_event` are the one
conversion, so a replayed run gives the same typed events as a followed one.

Kinds and data fields (docs/agent.md): ``message`` (``role``, ``text``, for the model ``turn`` and
``tool_calls``), ``text_delta`` (``text``: a piece of the model's answer as it streams),
``tool_start`` (``call_id``, ``tool``, ``args``), ``stderr`` / ``progress`` /
``stderr_truncated`` (``call_id``, ``tool`` and the call's own event fields), ``approval_pending``,
``tool_end`` and ``done``; ``child`` (``run_id``, ``persona``, ``depth``, ``parent_call_id``,
``event``, ``data``): an event of a delegated run, forwarded into every ancestor's timeline
(:class:`ChildEvent`; its call ids scoped ``child:<run id>:<call id>``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

from ongrid_skills.agent.transcript import ToolCall
from ongrid_skills.execution.records import Event

#: A tool call's own events, forwarded into the run's timeline (batched to the store).
ToolOutputKind = Literal["stderr", "progress", "stderr_truncated"]
TOOL_OUTPUT_KINDS: frozenset[str] = frozenset({"stderr", "progress", "stderr_truncated"})


def _now() -> float:
    return time.time()


@dataclass(frozen=True, slots=True)
class Said:
    """A whole message: the user's, the model's (its turn and tool calls), or the system's."""

    role: Literal["user", "assistant", "system"]
    text: str
    turn: int | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    kind: Literal["message"] = "message"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the model's answer as it streams (the ``message`` after it has it whole)."""

    text: str
    kind: Literal["text_delta"] = "text_delta"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call_id: str
    tool: str
    args: Any  # the args object, or the model's text when it is not JSON
    kind: Literal["tool_start"] = "tool_start"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """A stderr line, a progress report or the stderr cap of a running call (its own fields)."""

    kind: ToolOutputKind
    call_id: str
    tool: str
    data: dict[str, Any]
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class ApprovalPending:
    call_id: str
    tool: str
    args: Any
    execution_id: str
    approval_id: str | None
    signatures_required: int | None
    kind: Literal["approval_pending"] = "approval_pending"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class ToolEnded:
    call_id: str
    tool: str
    status: str
    execution_id: str | None
    duration_ms: float
    content: str  # up to EVENT_CONTENT_LIMIT of what the model received
    content_truncated: bool = False
    kind: Literal["tool_end"] = "tool_end"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class RunDone:
    """The last event of a run's stretch of work (until another message continues it)."""

    status: str
    final_answer: str | None
    error: dict[str, Any] | None
    turns: int
    kind: Literal["done"] = "done"
    ts: float = field(default_factory=_now, compare=False)


@dataclass(frozen=True, slots=True)
class ChildEvent:
    """An event of a delegated run, as its parent's (and grandparent's) timeline carries it.

    ``run_id`` and ``persona``: the delegated run; ``depth``: 1 for a child, 2 for a grandchild;
    ``parent_call_id``: the ``delegate`` call that started it, as the receiving timeline names
    it (scoped when that call was itself a child's). The inner ``event``'s call ids are scoped
    ``child:<run id>:<call id>``, so that no two calls of one timeline share an id."""

    run_id: str
    persona: str
    depth: int
    parent_call_id: str
    event: RunEvent
    kind: Literal["child"] = "child"
    ts: float = field(default_factory=_now, compare=False)


RunEvent = (
    Said | TextDelta | ToolStarted | ToolOutput | ApprovalPending | ToolEnded | RunDone | ChildEvent
)


def scope(run_id: str, call_id: str) -> str:
    """A call id of a delegated run, as its ancestors' timelines name it."""
    return call_id if call_id.startswith("child:") else f"child:{run_id}:{call_id}"


def scoped(event: RunEvent, run_id: str) -> RunEvent:
    """``event`` of the delegated run ``run_id`` with its call ids scoped (see :func:`scope`)."""
    if isinstance(event, ToolStarted | ToolOutput | ApprovalPending | ToolEnded):
        return replace(event, call_id=scope(run_id, event.call_id))
    if isinstance(event, Said) and event.tool_calls:
        calls = tuple(ToolCall(scope(run_id, c.id), c.name, c.arguments) for c in event.tool_calls)
        return replace(event, tool_calls=calls)
    if isinstance(event, ChildEvent):
        return replace(event, parent_call_id=scope(run_id, event.parent_call_id))
    return event


def forwarded(event: RunEvent, run_id: str, persona: str, depth: int, call_id: str) -> ChildEvent:
    """An event of the delegated run ``run_id`` as its parent records it: a grandchild's event
    (already a :class:`ChildEvent`) keeps its own run, with its ``delegate`` call scoped."""
    if isinstance(event, ChildEvent):
        inner = scoped(event, run_id)
        assert isinstance(inner, ChildEvent)
        return inner
    return ChildEvent(run_id, persona, depth, call_id, scoped(event, run_id), ts=event.ts)


def inner_kind(event: RunEvent) -> str:
    """The kind of the event itself, through any :class:`ChildEvent` wrapping."""
    return inner_kind(event.event) if isinstance(event, ChildEvent) else event.kind


def event_data(event: RunEvent) -> dict[str, Any]:
    """The event's fields as stored and streamed (same keys, same order as always)."""
    if isinstance(event, Said):
        data: dict[str, Any] = {"role": event.role, "text": event.text}
        if event.turn is not None:
            data["turn"] = event.turn
        if event.tool_calls is not None:
            data["tool_calls"] = [c.to_dict() for c in event.tool_calls]
        return data
    if isinstance(event, TextDelta):
        return {"text": event.text}
    if isinstance(event, ToolStarted):
        return {"call_id": event.call_id, "tool": event.tool, "args": event.args}
    if isinstance(event, ToolOutput):
        return {"call_id": event.call_id, "tool": event.tool, **event.data}
    if isinstance(event, ApprovalPending):
        return {
            "call_id": event.call_id,
            "tool": event.tool,
            "args": event.args,
            "execution_id": event.execution_id,
            "approval_id": event.approval_id,
            "signatures_required": event.signatures_required,
        }
    if isinstance(event, ChildEvent):
        return {
            "run_id": event.run_id,
            "persona": event.persona,
            "depth": event.depth,
            "parent_call_id": event.parent_call_id,
            "event": event.event.kind,
            "data": event_data(event.event),
        }
    if isinstance(event, ToolEnded):
        ended: dict[str, Any] = {
            "call_id": event.call_id,
            "tool": event.tool,
            "status": event.status,
            "execution_id": event.execution_id,
            "duration_ms": event.duration_ms,
            "content": event.content,
        }
        if event.content_truncated:
            ended["content_truncated"] = True
        return ended
    return {
        "status": event.status,
        "final_answer": event.final_answer,
        "error": event.error,
        "turns": event.turns,
    }


def to_event(event: RunEvent) -> Event:
    """The timeline and store record of a typed event."""
    return Event(event.kind, event_data(event), event.ts)


def from_event(event: Event) -> RunEvent:
    """A timeline or stored record read back as its typed event. ValueError for an unknown
    kind (a newer version's event read by an older one is not guessed at)."""
    d, ts = event.data, event.ts
    kind = event.type
    if kind == "message":
        calls = d.get("tool_calls")
        return Said(
            d["role"],
            d.get("text") or "",
            d.get("turn"),
            None if calls is None else tuple(ToolCall.from_dict(c) for c in calls),
            ts=ts,
        )
    if kind == "text_delta":
        return TextDelta(d["text"], ts=ts)
    if kind == "tool_start":
        return ToolStarted(d["call_id"], d["tool"], d.get("args"), ts=ts)
    if kind in TOOL_OUTPUT_KINDS:
        rest = {k: v for k, v in d.items() if k not in ("call_id", "tool")}
        return ToolOutput(cast(ToolOutputKind, kind), d["call_id"], d["tool"], rest, ts=ts)
    if kind == "approval_pending":
        return ApprovalPending(
            d["call_id"],
            d["tool"],
            d.get("args"),
            d["execution_id"],
            d.get("approval_id"),
            d.get("signatures_required"),
            ts=ts,
        )
    if kind == "tool_end":
        return ToolEnded(
            d["call_id"],
            d["tool"],
            d["status"],
            d.get("execution_id"),
            d["duration_ms"],
            d.get("content", ""),
            bool(d.get("content_truncated")),
            ts=ts,
        )
    if kind == "child":
        inner = from_event(Event(d["event"], d.get("data") or {}, ts))
        return ChildEvent(
            d["run_id"], d["persona"], int(d["depth"]), d["parent_call_id"], inner, ts=ts
        )
    if kind == "done":
        return RunDone(d["status"], d.get("final_answer"), d.get("error"), d.get("turns", 0), ts=ts)
    raise ValueError(f"unknown agent run event kind {kind!r}")
