"""The transcript of a run, made of typed parts, and its conversion to each provider's format.

Each entry is one part with a ``kind`` (as pydantic-ai's ``messages.py`` does), stored one row per
entry as ``role`` = the kind and ``content`` = the part's fields (``agent_messages``):

- :class:`UserText` ``user``: ``{"text": "..."}``
- :class:`ModelReply` ``assistant``: ``{"text": "...", "tool_calls": [{"id", "name",
  "arguments"}]}`` — the text part and the :class:`ToolCall` parts of one model answer;
  ``arguments`` is the JSON text the model wrote, kept verbatim (OpenAI wants it byte for byte).
- :class:`ToolResult` ``tool``: ``{"tool_call_id", "name", "content", "status", "execution_id",
  "is_error"}`` — ``content`` is exactly what the model receives: the skill's stdout verbatim, or
  the error envelope of SPEC §7.
- :class:`ApprovalWait` ``pending``: ``{"tool_call_id", "name", "execution_id", "approval_id"}`` —
  a call waiting for approval; never sent to a model, it lets a restarted manager resume the run.

:func:`part_content` and :func:`part_of` are the one serialisation (store, REST, ``chat --json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

SENT_KINDS = ("user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call part of a model's answer."""

    id: str
    name: str
    arguments: str  # the JSON text of the args, as the model wrote it

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> ToolCall:
        return ToolCall(str(data["id"]), str(data["name"]), str(data["arguments"]))

    def parsed(self) -> tuple[Any, str | None]:
        """The args object, or None and why it could not be read."""
        text = self.arguments.strip() or "{}"
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            return None, f"the arguments are not valid JSON: {exc}"
        return value, None


@dataclass(frozen=True, slots=True)
class Turn:
    """One reply of a model: its text and the tool calls it asks for."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class UserText:
    """What the user said."""

    text: str
    kind: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One answer of the model: its text part and its tool call parts."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    kind: Literal["assistant"] = "assistant"

    @staticmethod
    def of(turn: Turn) -> ModelReply:
        return ModelReply(turn.text, tuple(turn.tool_calls))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call's outcome, exactly as the model receives it (``content``)."""

    tool_call_id: str
    name: str
    content: str
    status: str
    execution_id: str | None = None
    is_error: bool = False
    kind: Literal["tool"] = "tool"


@dataclass(frozen=True, slots=True)
class ApprovalWait:
    """A call waiting for an approval request (never sent to a model)."""

    tool_call_id: str
    name: str
    execution_id: str
    approval_id: str | None
    kind: Literal["pending"] = "pending"


Part = UserText | ModelReply | ToolResult | ApprovalWait


def part_content(part: Part) -> dict[str, Any]:
    """The stored (and shown) fields of a part, without its kind."""
    if isinstance(part, UserText):
        return {"text": part.text}
    if isinstance(part, ModelReply):
        return {"text": part.text, "tool_calls": [c.to_dict() for c in part.tool_calls]}
    if isinstance(part, ToolResult):
        return {
            "tool_call_id": part.tool_call_id,
            "name": part.name,
            "content": part.content,
            "status": part.status,
            "execution_id": part.execution_id,
            "is_error": part.is_error,
        }
    return {
        "tool_call_id": part.tool_call_id,
        "name": part.name,
        "execution_id": part.execution_id,
        "approval_id": part.approval_id,
    }


def part_of(kind: str, content: dict[str, Any]) -> Part:
    """A stored entry read back as its typed part. Raises ValueError for an unknown kind."""
    c = content
    if kind == "user":
        return UserText(str(c["text"]))
    if kind == "assistant":
        calls = tuple(ToolCall.from_dict(call) for call in c.get("tool_calls") or [])
        return ModelReply(c.get("text") or "", calls)
    if kind == "tool":
        return ToolResult(
            c["tool_call_id"],
            c["name"],
            c["content"],
            c["status"],
            c.get("execution_id"),
            bool(c.get("is_error")),
        )
    if kind == "pending":
        return ApprovalWait(c["tool_call_id"], c["name"], c["execution_id"], c.get("approval_id"))
    raise ValueError(f"unknown transcript entry kind {kind!r}")


def error_envelope(code: str, message: str, details: Any = None) -> str:
    """The failure shape a model receives (SPEC §7), for refusals made before any execution."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return json.dumps({"error": error, "exit_code": None, "stderr_tail": ""}, ensure_ascii=False)


# ---- OpenAI chat completions ------------------------------------------------------------------
def to_openai(system: str, parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for part in parts:
        if isinstance(part, UserText):
            out.append({"role": "user", "content": part.text})
        elif isinstance(part, ModelReply):
            entry: dict[str, Any] = {"role": "assistant", "content": part.text or None}
            if part.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in part.tool_calls
                ]
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        elif isinstance(part, ToolResult):
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.content})
    return out


# ---- Anthropic messages -------------------------------------------------------------------------
def to_anthropic(parts: Sequence[Part]) -> list[dict[str, Any]]:
    """Messages alternate user/assistant: tool results (and any user text right after them) are
    merged into one user message, as the Messages API requires."""
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for part in parts:
        if isinstance(part, UserText):
            add("user", [{"type": "text", "text": part.text}])
        elif isinstance(part, ModelReply):
            blocks: list[dict[str, Any]] = []
            if part.text:
                blocks.append({"type": "text", "text": part.text})
            for call in part.tool_calls:
                args, _problem = call.parsed()
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": args if isinstance(args, dict) else {},
                    }
                )
            add("assistant", blocks or [{"type": "text", "text": ""}])
        elif isinstance(part, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            add("user", [block])
    return out
