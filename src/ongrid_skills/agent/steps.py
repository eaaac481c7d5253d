"""The steps of an agent run's loop, as values, and the wait of a call for its decision.

The loop (:mod:`.loop`) runs one step at a time and each step returns the next one:
:class:`AskModel` gives :class:`RunCalls` (the model asked for tools) or :class:`End` (it
answered, or ``max_turns``); :class:`RunCalls` gives :class:`AskModel`. A test or a door can thus
name where a run stands without reading the loop. This module decides nothing itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from ongrid_skills.agent.runs import RunStatus
from ongrid_skills.agent.transcript import Turn
from ongrid_skills.errors import NotFound, SkillError
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill


@dataclass(frozen=True, slots=True)
class AskModel:
    """Next: ask the model for a turn."""


@dataclass(frozen=True, slots=True)
class RunCalls:
    """Next: run the tool calls of the model's turn (among the tools it was offered)."""

    turn: Turn
    offered: dict[str, Skill]


@dataclass(frozen=True, slots=True)
class End:
    """The run is over (until another message continues it)."""

    status: RunStatus
    final_answer: str | None = None
    error: ErrorInfo | None = None


Step = AskModel | RunCalls | End


async def wait_final(
    manager: Manager, execution_id: str, forward: Callable[[Event], None], poll_seconds: float
) -> Execution:
    """Until the execution ends: approved and run (here or by another process sharing the
    store), rejected, expired, cancelled. Live events are forwarded while it runs here."""
    seen = 0
    while True:
        execution = manager.store.executions.get(execution_id)
        if execution is None:
            raise NotFound(f"execution {execution_id} disappeared from the store")
        if execution.status.final:  # what ran between two looks: from the store, in order
            for seq, event in manager.store.executions.events(execution_id, after=seen):
                seen = seq
                forward(event)
            return execution
        if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
            with contextlib.suppress(SkillError):
                manager.desk.get(execution.approval_id)  # expires a request past its TTL
        timeline = manager.hub.get(execution_id)
        if timeline is not None and execution.status is Status.RUNNING:
            async for seq, event in timeline.follow(after=seen):
                seen = seq
                forward(event)
            continue
        await asyncio.sleep(poll_seconds)
