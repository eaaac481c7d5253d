"""A run's typed events and transcript parts: one serialisation, read back to the same values,
with the fields the REST API has always shown."""

from __future__ import annotations

from typing import Any

import pytest

from ongrid_skills.agent import (
    ApprovalPending,
    ApprovalWait,
    ModelReply,
    RunDone,
    RunEvent,
    Said,
    TextDelta,
    ToolCall,
    ToolEnded,
    ToolOutput,
    ToolResult,
    ToolStarted,
    UserText,
    from_event,
    to_event,
)
from ongrid_skills.agent.transcript import Part, part_content, part_of
from ongrid_skills.execution.records import Event

CALL = ToolCall("c1", "set_flag", '{"flag": "on"}')
EVENTS: list[tuple[RunEvent, dict[str, Any]]] = [
    (Said("user", "hi"), {"role": "user", "text": "hi"}),
    (
        Said("assistant", "ok", 2, (CALL,)),
        {"role": "assistant", "text": "ok", "turn": 2, "tool_calls": [CALL.to_dict()]},
    ),
    (TextDelta("o"), {"text": "o"}),
    (
        ToolStarted("c1", "set_flag", {"flag": "on"}),
        {"call_id": "c1", "tool": "set_flag", "args": {"flag": "on"}},
    ),
    (
        ToolOutput("progress", "c1", "set_flag", {"progress": 1, "total": 2, "message": "half"}),
        {"call_id": "c1", "tool": "set_flag", "progress": 1, "total": 2, "message": "half"},
    ),
    (
        ApprovalPending("c1", "set_flag", {"flag": "on"}, "e1", "a1", 1),
        {
            "call_id": "c1",
            "tool": "set_flag",
            "args": {"flag": "on"},
            "execution_id": "e1",
            "approval_id": "a1",
            "signatures_required": 1,
        },
    ),
    (
        ToolEnded("c1", "set_flag", "succeeded", "e1", 12.5, "{}", True),
        {
            "call_id": "c1",
            "tool": "set_flag",
            "status": "succeeded",
            "execution_id": "e1",
            "duration_ms": 12.5,
            "content": "{}",
            "content_truncated": True,
        },
    ),
    (
        RunDone("failed", None, {"code": "provider_auth", "message": "bad key"}, 1),
        {
            "status": "failed",
            "final_answer": None,
            "error": {"code": "provider_auth", "message": "bad key"},
            "turns": 1,
        },
    ),
]


@pytest.mark.parametrize(("event", "data"), EVENTS)
def test_each_event_is_stored_with_its_documented_fields_and_read_back_the_same(
    event: RunEvent, data: dict[str, Any]
) -> None:
    stored = to_event(event)
    assert stored.type == event.kind and stored.data == data and stored.ts == event.ts
    back = from_event(Event(stored.type, stored.data, stored.ts))
    assert back == event and back.ts == event.ts


def test_a_tool_end_within_the_limit_has_no_truncation_field() -> None:
    ended = ToolEnded("c1", "t", "failed", None, 1.0, "x")
    assert "content_truncated" not in to_event(ended).data


def test_an_unknown_event_kind_is_refused_not_guessed() -> None:
    with pytest.raises(ValueError, match="unknown agent run event kind"):
        from_event(Event("telepathy", {}))


PARTS: list[tuple[Part, dict[str, Any]]] = [
    (UserText("hi"), {"text": "hi"}),
    (ModelReply("ok", (CALL,)), {"text": "ok", "tool_calls": [CALL.to_dict()]}),
    (
        ToolResult("c1", "set_flag", "{}", "succeeded", "e1", False),
        {
            "tool_call_id": "c1",
            "name": "set_flag",
            "content": "{}",
            "status": "succeeded",
            "execution_id": "e1",
            "is_error": False,
        },
    ),
    (
        ApprovalWait("c1", "set_flag", "e1", "a1"),
        {"tool_call_id": "c1", "name": "set_flag", "execution_id": "e1", "approval_id": "a1"},
    ),
]


@pytest.mark.parametrize(("part", "content"), PARTS)
def test_each_transcript_part_is_stored_as_its_documented_fields_and_read_back(
    part: Part, content: dict[str, Any]
) -> None:
    assert part_content(part) == content
    assert part_of(part.kind, content) == part
