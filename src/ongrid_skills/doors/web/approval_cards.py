"""What the console shows of one approval request: a card, the same in the inbox, on the
request's own page and in the inbox's live stream.

A card holds exactly what will run (skill, class, definition hash, the frozen args), who asked
and as which persona, the agent run that asked with its last messages, the signatures so far,
the execution the request holds, and what the viewer may do about it. Whether the viewer may
approve or reject is the gate's answer (``signer_problem``, ``approver_problem``), asked here only
to show or hide the buttons: the desk asks again, and decides, when the form is posted.
It reads the store; it must never change a request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ongrid_skills.agent.runs import RunRecord, RunStore, StoredMessage
from ongrid_skills.execution.records import Execution
from ongrid_skills.governance.gate import approver_problem, signer_problem
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.store.approvals import Approval
from ongrid_skills.types import SkillClass

#: The prefix of an agent run's principal (``agent:<run id>``, see agent/loop.py).
AGENT_PREFIX = "agent:"
#: How many of the asking run's last transcript entries a card shows.
LAST_MESSAGES = 4
#: Characters of one transcript entry a card shows (the run's page has them all).
EXCERPT_CHARS = 400


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One transcript entry, as a line of text: who spoke and (the start of) what was said."""

    role: str
    text: str
    cut: bool


@dataclass(frozen=True, slots=True)
class AskingRun:
    """The agent run behind a request: the run (None when it is gone) and its last entries."""

    run_id: str
    run: RunRecord | None
    last: list[Excerpt]


@dataclass(frozen=True, slots=True)
class Card:
    approval: Approval
    args_json: str
    execution: Execution | None
    asking: AskingRun | None
    approve_problem: str | None  # why the viewer may not approve now (None: the button shows)
    reject_problem: str | None
    now: float

    @property
    def pending(self) -> bool:
        return self.approval.status == "pending"

    @property
    def missing(self) -> int:
        return max(0, self.approval.signatures_required - len(self.approval.approvals))


def excerpt(message: StoredMessage) -> Excerpt:
    """A transcript entry as one line: what a person needs to see why the agent asked."""
    content = message.content
    if message.role == "assistant":
        calls = [
            f"{c.get('name')}({c.get('arguments', '')})" for c in content.get("tool_calls", [])
        ]
        parts = [content.get("text") or "", *(f"calls {c}" for c in calls)]
        text = "\n".join(p for p in parts if p)
    elif message.role == "tool":
        text = f"{content.get('name')} → {content.get('status')}: {content.get('content', '')}"
    elif message.role == "pending":
        text = f"{content.get('name')} waits for approval {content.get('approval_id')}"
    else:
        text = str(content.get("text", ""))
    return Excerpt(message.role, text[:EXCERPT_CHARS], len(text) > EXCERPT_CHARS)


def asking_run(manager: Manager, requested_by: str) -> AskingRun | None:
    """The agent run that asked, when an agent did (its principal is ``agent:<run id>``)."""
    if not requested_by.startswith(AGENT_PREFIX):
        return None
    run_id = requested_by.removeprefix(AGENT_PREFIX)
    runs = RunStore(manager.store)
    run = runs.get(run_id)
    if run is None:
        return AskingRun(run_id, None, [])
    said = [m for m in runs.messages(run_id) if m.role != "pending"]
    return AskingRun(run_id, run, [excerpt(m) for m in said[-LAST_MESSAGES:]])


def decision_problems(
    approval: Approval, viewer: Principal, started_by: str | None = None
) -> tuple[str | None, str | None]:
    """(why not approve, why not reject) for ``viewer`` now; None where the button shows.
    ``started_by``: who started the agent run that asked, if one did."""
    if approval.status != "pending":
        closed = f"the request is {approval.status}"
        return closed, closed
    problem = signer_problem(viewer)
    if problem is None and any(s.principal == viewer.name for s in approval.signatures):
        problem = "you signed this request already"
    if problem is not None:
        return problem, problem
    try:
        skill_class = SkillClass(approval.skill_class)
    except ValueError:  # a class this version does not know: leave the desk to refuse
        return f"unknown class {approval.skill_class}", None
    return approver_problem(viewer, skill_class, approval.requested_by, started_by), None


def pretty(value: Any) -> str:
    """JSON as people read it: indented, keys in their stored order, non-ASCII kept."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def card(manager: Manager, approval: Approval, viewer: Principal) -> Card:
    asking = asking_run(manager, approval.requested_by)
    started_by = asking.run.requested_by if asking and asking.run else None
    approve_problem, reject_problem = decision_problems(approval, viewer, started_by)
    return Card(
        approval=approval,
        args_json=pretty(approval.args),
        execution=manager.store.executions.get(approval.execution_id),
        asking=asking,
        approve_problem=approve_problem,
        reject_problem=reject_problem,
        now=manager.desk.clock(),
    )
