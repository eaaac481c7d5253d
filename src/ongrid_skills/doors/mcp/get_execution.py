"""The door's own ``get_execution`` tool: the status and outcome of an execution.

``id`` is an execution id or an approval id (the pending-approval result gives both);
``wait_seconds`` waits up to that long for the call to end, forwarding its live timeline when it
runs in this process. Its definition is :data:`ongrid_skills.doors.mcp.tools.GET_EXECUTION_TOOL`.

It only reads the manager and the store: it never runs, approves or cancels a call (a cancelled
``get_execution`` request stops waiting, the call goes on).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types

from ongrid_skills.doors.mcp.follow import await_end
from ongrid_skills.doors.mcp.results import error_result, execution_result
from ongrid_skills.doors.mcp.session import Ctx
from ongrid_skills.doors.mcp.tools import GET_EXECUTION, MAX_WAIT_SECONDS
from ongrid_skills.errors import InvalidArgs, NotFound, Violation
from ongrid_skills.manager import Manager


async def get_execution(manager: Manager, ctx: Ctx, args: Any) -> types.CallToolResult:
    """Answer a ``get_execution`` call: the execution's result, envelope or status."""
    problems = argument_problems(args)
    if problems:
        return error_result(InvalidArgs(GET_EXECUTION, problems).to_dict())
    ident: str = args["id"]
    wait = int(args.get("wait_seconds", 0))
    try:
        execution = manager.get(ident)
    except NotFound:
        approval = manager.store.approvals.get(ident)
        if approval is None:
            return error_result(NotFound(f"unknown execution {ident!r}").to_dict())
        execution = manager.get(approval.execution_id)
    if not execution.status.final and wait > 0:
        with anyio.move_on_after(wait):
            await await_end(manager, ctx, execution.id, execution.skill)
        execution = manager.get(execution.id)
    return execution_result(execution, manager)


def argument_problems(args: Any) -> list[Violation]:
    """What is wrong with ``args``: the input schema's rules, and a bound on the ``id``."""
    if not isinstance(args, dict):
        return [Violation("", "must be an object")]
    problems = []
    ident = args.get("id")
    if not isinstance(ident, str) or not ident or len(ident) > 200:
        problems.append(Violation("/id", "must be a non-empty string (≤ 200 characters)"))
    wait = args.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_SECONDS:
        problems.append(Violation("/wait_seconds", f"must be an integer 0..{MAX_WAIT_SECONDS}"))
    extra = sorted(set(args) - {"id", "wait_seconds"})
    problems.extend(Violation(f"/{k}", "unknown property") for k in extra)
    return problems
