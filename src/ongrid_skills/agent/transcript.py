"""The neutral transcript of a run and its conversion to each provider's message format.

One entry per message, stored as is (``agent_messages.content``):

- ``user``:      ``{"text": "..."}``
- ``assistant``: ``{"text": "...", "tool_calls": [{"id", "name", "arguments"}]}`` — ``arguments``
  is the JSON text the model wrote, kept verbatim (OpenAI wants it back byte for byte).
- ``tool``:      ``{"tool_call_id", "name", "content", "status", "execution_id", "is_error"}`` —
  ``content`` is exactly what the model receives: the skill's stdout verbatim, or the error
  envelope of SPEC §7.
- ``pending``:   ``{"tool_call_id", "name", "execution_id", "approval_id"}`` — a call waiting for
  approval; never sent to a model, it lets a restarted manager resume the run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SENT_ROLES = ("user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON text of the args, as the model wrote it

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

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
class Message:
    role: str  # user | assistant | tool | pending
    content: dict[str, Any]

    @staticmethod
    def user(text: str) -> Message:
        return Message("user", {"text": text})

    @staticmethod
    def assistant(turn: Turn) -> Message:
        return Message(
            "assistant", {"text": turn.text, "tool_calls": [c.to_dict() for c in turn.tool_calls]}
        )

    def calls(self) -> list[ToolCall]:
        return [
            ToolCall(c["id"], c["name"], c["arguments"]) for c in self.content.get("tool_calls", [])
        ]


def error_envelope(code: str, message: str, details: Any = None) -> str:
    """The failure shape a model receives (SPEC §7), for refusals made before any execution."""
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return json.dumps({"error": error, "exit_code": None, "stderr_tail": ""}, ensure_ascii=False)


# ---- OpenAI chat completions ------------------------------------------------------------------
def to_openai(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        c = message.content
        if message.role == "user":
            out.append({"role": "user", "content": c["text"]})
        elif message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": c.get("text") or None}
            calls = c.get("tool_calls") or []
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": call["arguments"]},
                    }
                    for call in calls
                ]
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        elif message.role == "tool":
            out.append({"role": "tool", "tool_call_id": c["tool_call_id"], "content": c["content"]})
    return out


# ---- Anthropic messages -------------------------------------------------------------------------
def to_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
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

    for message in messages:
        c = message.content
        if message.role == "user":
            add("user", [{"type": "text", "text": c["text"]}])
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if c.get("text"):
                blocks.append({"type": "text", "text": c["text"]})
            for call in c.get("tool_calls") or []:
                args, _problem = ToolCall(call["id"], call["name"], call["arguments"]).parsed()
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["name"],
                        "input": args if isinstance(args, dict) else {},
                    }
                )
            add("assistant", blocks or [{"type": "text", "text": ""}])
        elif message.role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": c["tool_call_id"],
                "content": c["content"],
            }
            if c.get("is_error"):
                block["is_error"] = True
            add("user", [block])
    return out
