"""What a ``tools/call`` answers: an execution or a refusal as a ``CallToolResult``.

A success is the skill's verbatim stdout (plus ``structuredContent`` when it is an object), a
failure the model's error envelope (SPEC §7), a call waiting for signatures a pending-approval
result that says how to approve it and how to follow up, a running call its status.

This module only renders what the manager already recorded: it never submits, runs, waits for or
cancels a call, and never decides whether a call may run.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import mcp_types as types

from ongrid_skills.doors.mcp.tools import GET_EXECUTION
from ongrid_skills.errors import SkillError, UnknownSkill
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.manager import Manager
from ongrid_skills.notify.messages import preview_line


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def unknown_tool(name: str, exc: UnknownSkill) -> str:
    """The message of an unknown tool, with the loader's reason when its file was refused."""
    return f"Unknown tool: {name}" + (f": it failed to load: {exc.failed}" if exc.failed else "")


def error_result(error: dict[str, Any]) -> types.CallToolResult:
    """A refusal before anything ran, as the model's error envelope (SPEC §7)."""
    body = {"error": error, "exit_code": None, "stderr_tail": ""}
    return types.CallToolResult(
        content=[_text(json.dumps(body, ensure_ascii=False))], is_error=True
    )


def execution_result(execution: Execution, manager: Manager) -> types.CallToolResult:
    """Verbatim stdout (+ structuredContent for an object), the envelope on failure, or status."""
    status = execution.status
    if status is Status.SUCCEEDED and execution.result_text is not None:
        structured = execution.result if isinstance(execution.result, dict) else None
        return types.CallToolResult(
            content=[_text(execution.result_text)], structured_content=structured
        )
    if status is Status.PENDING_APPROVAL:
        return _pending_result(execution, manager)
    if status is Status.RUNNING:
        body = {"status": "running", "execution_id": execution.id}
        return types.CallToolResult(content=[_text(json.dumps(body))], structured_content=body)
    return types.CallToolResult(content=[_text(execution.envelope())], is_error=True)


def _pending_result(execution: Execution, manager: Manager) -> types.CallToolResult:
    approval_id = execution.approval_id or ""
    needed, collected, review, run = 1, 0, None, None
    with contextlib.suppress(SkillError):
        approval = manager.desk.get(approval_id)
        needed, collected = approval.signatures_required, len(approval.approvals)
        review = approval.review.to_dict() if approval.review else None
        run = (approval.preview or {}).get("run")
    what = (
        "one human confirmation"
        if needed == 1
        else f"{needed} distinct human signers (admins), {collected} signed so far"
    )
    sentence = (
        f"Not run yet: {execution.skill} waits for {what}. Approve it on the ongrid-skills "
        f"server of this data dir with `ongrid-skills approvals approve {approval_id}` or "
        f"`POST /v1/approvals/{approval_id}/approve`, then call {GET_EXECUTION} with "
        f'{{"id": "{execution.id}"}} for the outcome.'
    )
    if review is not None:  # the reviewer's opinion: advice to the humans who sign
        said = review["decision"] or review["note"] or "reading the request"
        sentence += f" The reviewer ({review['persona']}) says: {said}."
    if isinstance(run, dict):  # the skill's dry run (SPEC §20): what the call would do
        sentence += f" Its preview: {preview_line(run)}."
    else:
        run = None
    structured = {
        "status": "pending_approval",
        "approval_id": approval_id,
        "execution_id": execution.id,
        "signatures_required": needed,
        "signatures_collected": collected,
        **({"review": review} if review is not None else {}),
        **({"preview": run} if run is not None else {}),
    }
    return types.CallToolResult(
        content=[_text(execution.envelope()), _text(sentence)], structured_content=structured
    )
