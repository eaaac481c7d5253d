"""Delegation (SPEC §19): ``delegate(persona, task)``, a tool of the agent kernel itself.

A persona with ``can_delegate: true`` (and the bundled ``coordinator``) is offered ``delegate``
while its run is less than :data:`MAX_DEPTH` deep. A call runs a *child* run as the named persona
with ``task`` as its one user message, for the same principal, and its final answer is the
call's result. The child is a run like any other (stored, linked to its parent by
``parent_run_id``/``parent_call_id``, audited, its calls through the manager's gate and
approvals, its persona's ``max_turns``), with three limits:

- its tools are those its persona is offered *and* every ancestor's persona could use
  (:func:`within`): a child never gets a tool its parent could not use, so the stricter
  ``permission_mode`` wins;
- depth: a human's run is 0, its child 1, a grandchild 2; a run at depth 2 is not offered
  ``delegate``, and a call of it anyway is refused (``depth_limit``);
- the target persona must be one the principal may use (the gate's ``persona_usable``), else the
  call is refused and nothing runs; so is an unknown persona.

The child's events are forwarded into the parent's timeline as ``child`` events
(:class:`~.events.ChildEvent`, call ids scoped), so every door following the parent shows them;
cancelling the parent cancels the child. The kernel's ``delegate`` is not a registry skill: no
door but the agent loop can call it. This module never decides a permission (the gate does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

from ongrid_skills.agent.events import RunEvent, forwarded
from ongrid_skills.agent.record import RunRecorder
from ongrid_skills.agent.runs import RunRecord, RunStatus
from ongrid_skills.agent.transcript import ToolCall, error_envelope
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.gate import persona_permits, persona_usable
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role, SkillClass

DELEGATE_TOOL = "delegate"
#: The ``source`` of the kernel's own tools (a registry skill of the same name is not it).
KERNEL_SOURCE = "kernel"
#: A human's run is at depth 0; a run at this depth may not delegate.
MAX_DEPTH = 2
#: The catalogue of a delegating persona's prompt: at most this many personas, each entry cut.
CATALOGUE_ENTRIES = 20
CATALOGUE_ENTRY_CHARS = 300
MAX_TASK_CHARS = 20_000
#: How long a cancelled parent waits for its child to have ended.
CHILD_STOP_SECONDS = 10.0

CATALOGUE_HEADER = (
    f"Personas you may hand a task to with {DELEGATE_TOOL}(persona, task) — the specialist "
    "sees only the task, and gets only tools you may use yourself:"
)


class Child(Protocol):
    """What delegating needs of the child run (an :class:`~.loop.AgentRun`)."""

    record: RunRecord
    limits: tuple[Persona, ...]
    confirm: Any
    human: Principal | None
    cancel_requested: bool

    @property
    def listeners(self) -> list[Callable[[RunEvent], None]]: ...


class Host(Protocol):
    """What delegating needs of the service (an :class:`~.kernel.AgentService`)."""

    def create(
        self, persona: str, requester: Principal, *, parent: Any = None, call_id: str | None = None
    ) -> Child: ...

    def drive(self, run: Any, message: str) -> asyncio.Task[RunRecord]: ...


class Parent(Protocol):
    """What delegating needs of the run whose ``delegate`` call it is (an ``AgentRun``)."""

    m: Manager
    record: RunRecord
    rec: RunRecorder
    agent: Principal
    limits: tuple[Persona, ...]
    confirm: Any
    human: Principal | None
    cancel_requested: bool

    @property
    def service(self) -> Host: ...

    def requester(self) -> Principal: ...


def delegate_tool() -> Skill:
    """The tool definition a delegating persona's model is sent."""
    return Skill(
        name=DELEGATE_TOOL,
        description=(
            "Hand a task to another persona: it runs as a separate agent with its own tools "
            "(only those you may use too) and its answer is this call's result."
        ),
        when_to_use="When a specialist persona of the catalogue in your instructions fits the "
        "task, or a part of it, better than you do.",
        skill_class=SkillClass.SAFE,
        category="agent",
        kind="native",
        source=KERNEL_SOURCE,
        schema={
            "type": "object",
            "properties": {
                "persona": {"type": "string", "description": "The persona's exact name."},
                "task": {
                    "type": "string",
                    "description": "A self-contained task: all the specialist will know.",
                },
            },
            "required": ["persona", "task"],
            "additionalProperties": False,
        },
        origin="kernel",
        activation="always",
    )


def may_delegate(persona: Persona, depth: int) -> bool:
    """Whether a run of ``persona`` at ``depth`` is offered ``delegate``."""
    return persona.can_delegate and depth < MAX_DEPTH


def within(skill: Skill, limits: tuple[Persona, ...]) -> bool:
    """Whether every ancestor's persona could use ``skill`` (mode and tool lists)."""
    return all(persona_permits(ancestor, skill) for ancestor in limits)


def turn_tools(
    offered: list[Skill],
    persona: Persona,
    record: RunRecord,
    limits: tuple[Persona, ...],
    registry: Registry,
) -> tuple[list[Skill], str | None]:
    """The tools of one turn of a run (from what its persona and role are ``offered``: those
    every ancestor could use too, and the kernel's ``delegate`` when it may delegate) and the
    catalogue its system prompt carries then (None when it may not delegate)."""
    skills = [s for s in offered if within(s, limits)]
    if not may_delegate(persona, record.depth):
        return skills, None
    skills = [s for s in skills if s.name != DELEGATE_TOOL]
    skills.append(delegate_tool())
    return skills, catalogue(delegates(registry, Role(record.role), persona.name))


def delegates(registry: Registry, role: Role, me: str) -> list[Persona]:
    """The personas a run of ``me`` may delegate to: those ``role`` may use, but itself."""
    return sorted(
        (p for p in registry.personas.values() if p.name != me and persona_usable(p, role)),
        key=lambda p: p.name,
    )


def catalogue(personas: list[Persona]) -> str:
    """The bounded catalogue of a delegating persona's system prompt: name, description and
    when to use, at most :data:`CATALOGUE_ENTRIES` entries, then how many more there are."""
    lines = [CATALOGUE_HEADER]
    for persona in personas[:CATALOGUE_ENTRIES]:
        entry = " ".join(
            f"- {persona.name} ({persona.permission_mode.value}): {persona.description} "
            f"When to use: {persona.when_to_use}".split()
        )
        if len(entry) > CATALOGUE_ENTRY_CHARS:
            entry = entry[: CATALOGUE_ENTRY_CHARS - 1] + "…"
        lines.append(entry)
    if not personas:
        lines.append("(none: no other persona is available to you)")
    rest = len(personas) - CATALOGUE_ENTRIES
    if rest > 0:
        lines.append(f"…and {rest} more (not listed; delegate to one by its exact name).")
    return "\n".join(lines)


def refusal(run: Parent, args: Any, persona: Persona) -> tuple[str, str] | None:
    """Why this ``delegate`` call of ``run`` (as ``persona``) may not go on: (code, message)."""
    if run.record.depth >= MAX_DEPTH:
        return (
            "depth_limit",
            f"delegation goes at most {MAX_DEPTH} levels deep: this run (depth "
            f"{run.record.depth}) may not delegate; do the task with your own tools",
        )
    if not persona.can_delegate:
        return "not_offered", f"persona {persona.name} may not delegate (can_delegate is false)"
    if not isinstance(args, dict):
        return "invalid_args", "the arguments must be a JSON object with persona and task"
    name, task = args.get("persona"), args.get("task")
    unknown = sorted(set(args) - {"persona", "task"})
    if unknown:
        return "invalid_args", f"unknown argument {unknown[0]!r} (the arguments: persona, task)"
    if not isinstance(name, str) or not name.strip():
        return "invalid_args", "persona must be a persona's name"
    if not isinstance(task, str) or not task.strip():
        return "invalid_args", "task must be a non-blank text"
    if len(task) > MAX_TASK_CHARS:
        return "invalid_args", f"task is over {MAX_TASK_CHARS} characters"
    target = run.m.registry.personas.get(name)
    if target is None:
        return "unknown_persona", f"there is no persona {name!r}"
    role = Role(run.record.role)
    if not persona_usable(target, role):
        return (
            "forbidden",
            f"role {role.value} may not use persona {name} ({target.permission_mode.value})",
        )
    return None


async def delegate(run: Parent, call: ToolCall, args: Any, persona: Persona) -> None:
    """Run one ``delegate`` call of ``run`` to its end: refused, or a child run whose final
    answer (or why it has none) is the call's result."""
    started = time.monotonic()
    problem = refusal(run, args, persona)
    if problem is not None:
        run.rec.refused(call, started, run.agent.name, *problem)
        return
    try:
        child = run.service.create(args["persona"], run.requester(), parent=run, call_id=call.id)
    except SkillError as exc:  # no model for that persona, a persona gone meanwhile
        run.rec.refused(call, started, run.agent.name, exc.code, exc.message)
        return
    child.limits = (*run.limits, persona)
    child.confirm, child.human = run.confirm, run.human
    record = child.record
    child.listeners.append(
        lambda event: run.rec.emit(
            forwarded(event, record.id, record.persona, record.depth, call.id)
        )
    )
    task = run.service.drive(child, args["task"])
    try:
        await asyncio.wait({task})  # never cancels the child by itself
    except asyncio.CancelledError:
        # The parent is stopped: so is the child (cancelled, or interrupted at a shutdown).
        child.cancel_requested = run.cancel_requested
        task.cancel()
        await asyncio.wait({task}, timeout=CHILD_STOP_SECONDS)
        raise
    if record.status is RunStatus.DONE:
        content, status = record.final_answer or "", "succeeded"
    else:
        why = record.error.message if record.error else record.status.value
        details = {"run_id": record.id, "persona": record.persona}
        if record.final_answer:
            details["final_answer"] = record.final_answer
        message = f"the delegated run {record.id} ({record.persona}) ended {record.status}: {why}"
        content, status = error_envelope(record.status.value, message, details), "failed"
    run.rec.result(call, started, content, status, None)
