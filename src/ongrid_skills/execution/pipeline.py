"""One call of a skill, end to end: resolve → gate → validate → run → Execution.

This is the local path (Python API and CLI). It raises typed errors for what the caller did
wrong (unknown skill or persona, invalid args, denial, approval needed) and never for the skill's
own failure, which is the Execution's ``status`` and ``error``. It never touches the store: the
manager's ``submit()`` reuses :func:`run_skill` and the checks here, and adds persistence, the
approval desk and the audit around them.
"""

from __future__ import annotations

import json
import os
import time
from functools import lru_cache
from typing import Any

from ongrid_skills.builtins.base import Reach, ToolPorts
from ongrid_skills.errors import (
    ApprovalRequired,
    CredentialMissing,
    CredentialUnreadable,
    Denied,
    InvalidArgs,
    InvalidRequest,
    Violation,
)
from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.grant import Grant, Grants
from ongrid_skills.execution.inprocess import run_builtin
from ongrid_skills.execution.records import ErrorInfo, Event, EventSink, Execution, Status
from ongrid_skills.execution.runner import Runner, RunOutcome, SpawnSpec, SubprocessRunner
from ongrid_skills.governance.gate import admit
from ongrid_skills.paths import child_env
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.skills.schemas import args_problem

# The args as the child reads them on stdin. Built once: json.dumps with keyword arguments
# builds a new encoder for every call.
_PAYLOAD = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@lru_cache(maxsize=1)
def default_runner() -> SubprocessRunner:
    """The runner used when none is passed (created on first use, not at import), with the
    sandbox policy of the ``ONGRID_*`` settings (class defaults, limits, the data dir kept out)."""
    return SubprocessRunner(sandbox=SandboxPolicy.from_settings(Settings.load()))


def check_transportable(name: str, args: Any) -> None:
    """Args must survive the trip as strict JSON (no NaN, no lone surrogates, ≤ 64 levels)."""
    problem = args_problem(args)
    if problem is not None:
        raise InvalidArgs(name, [Violation("", problem)])


def check_runnable(skill: Skill) -> None:
    """Instructions skills are read (``read_skill``), never run."""
    if skill.kind == "instructions":
        raise InvalidRequest(f"{skill.name} is an instructions skill: read it with read_skill")


async def execute(
    registry: Registry,
    name: str,
    args: Any,
    *,
    confirm: bool = False,
    persona: str | None = None,
    on_event: EventSink | None = None,
    allow_dangerous: bool = False,
    runner: Runner | None = None,
    requested_by: str | None = None,
    reach: Reach | None = None,
    grants: Grants | None = None,
) -> Execution:
    """Run ``name`` with ``args`` and return its Execution.

    ``confirm`` is the human confirmation a mutating skill needs; ``allow_dangerous`` (with
    ``confirm``) is the local break-glass for a dangerous skill. ``on_event`` receives each
    timeline event as it happens. ``reach`` bounds what built-ins touch (default: from the
    ``ONGRID_*`` settings). ``grants``: where a skill with credential slots gets them (a data
    dir's credential store); without it such a skill is refused. Raises UnknownSkill,
    UnknownPersona, Denied, InvalidArgs, ApprovalRequired and CredentialMissing; a skill's own
    failure (and a credential that cannot be read now) is in the returned Execution.
    """
    skill = registry.get(name)
    check_runnable(skill)
    check_transportable(name, args)
    who = registry.persona(persona) if persona else None
    decision = admit(skill, who, confirmed=confirm, allow_dangerous=allow_dangerous)
    if decision.action == "deny":
        raise Denied(decision.reason)
    violations = skill.validate(args)
    if violations:
        raise InvalidArgs(name, violations)
    if decision.action == "approve":
        raise ApprovalRequired(decision.reason, signatures_required=decision.signatures_required)
    if skill.credentials:
        reason = grants.missing(skill) if grants is not None else "needs a credential store"
        if reason is not None:
            raise CredentialMissing(f"{name} {reason}")
    execution = Execution(skill=name, args=args, persona=persona, requested_by=requested_by)
    if reach is None and skill.builtin is not None:
        reach = Reach.from_settings(Settings.load())
    granted = await grant_for(skill, execution, grants)
    if granted is None and skill.credentials:
        return execution  # failed: its credentials could not be read
    try:
        await run_skill(
            skill,
            execution,
            on_event,
            runner or default_runner(),
            registry=registry,
            persona=who,
            reach=reach,
            grant=granted,
        )
    finally:
        if grants is not None:
            grants.release(granted)
    return execution


async def grant_for(skill: Skill, execution: Execution, grants: Grants | None) -> Grant | None:
    """The credentials of one call of ``skill`` (None when it has no slots). A slot left
    unbound since the call was admitted (``credential_missing``) or a value that cannot be read
    now (``credential_unreadable``) fails ``execution`` before anything runs, and None is
    returned."""
    if not skill.credentials:
        return None
    try:
        if grants is None:
            raise CredentialMissing(f"{skill.name} needs credentials: no credential store")
        found = await grants.grant(skill, execution.id)
    except (CredentialMissing, CredentialUnreadable) as exc:
        execution.status = Status.FAILED
        execution.error = ErrorInfo(exc.code, exc.message)
        execution.finished_at = time.time()
        return None
    if found is None:
        return None
    grant, slots = found
    expected = execution.credentials
    if expected is not None and expected != slots:  # rebound since it was admitted or signed
        grants.release(grant)
        execution.status = Status.FAILED
        execution.error = ErrorInfo(
            "credentials_changed",
            f"a credential slot of {skill.name} was rebound after the call was admitted "
            "(or approved): not run",
        )
        execution.finished_at = time.time()
        return None
    execution.credentials = dict(slots)
    return grant


async def run_skill(
    skill: Skill,
    execution: Execution,
    on_event: EventSink | None,
    runner: Runner,
    *,
    registry: Registry | None = None,
    persona: Persona | None = None,
    reach: Reach | None = None,
    grant: Grant | None = None,
    ports: ToolPorts | None = None,
) -> None:
    """Run an already-gated call and fill ``execution`` in place; ``grant``: the credentials
    the call is given (env entries, their directory, the masker of their values)."""

    def emit(event: Event) -> None:
        if on_event is not None:
            on_event(event)

    execution.status = Status.RUNNING
    execution.started_at = time.time()
    emit(Event("status", {"status": "running", "skill": skill.name}))
    if skill.builtin is not None:
        outcome = await run_builtin(
            skill,
            execution.args,
            emit,
            registry=registry,
            persona=persona,
            reach=reach,
            ports=ports,
            caller=execution.requested_by,
        )
        apply_outcome(execution, outcome)
        emit(Event("status", {"status": execution.status.value}))
        return
    target = skill.target
    # Loaded skills always hold a callable or a target: skill.json and ``exec:`` tools get a
    # target from their loader, an unresolvable ``builtin:`` tool is loaded unavailable and
    # admit() denies it, instructions skills are refused by check_runnable(). Only a Skill built
    # by hand with neither gets here.
    assert target is not None, (
        f"skill {skill.name} has neither a built-in callable nor a target: loaders give every "
        "available skill one of them, and admit() denies unavailable ones"
    )
    env = child_env(target.env_allow, os.environ)
    extra_read: tuple[str, ...] = ()
    if "PATH" in env and skill.source.startswith("pack:"):  # the pack's own bin/ first
        tools = os.path.join(target.root, "bin")
        if os.path.isdir(tools):
            env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
            extra_read = (tools,)
    if grant is not None:
        env.update(grant.environment())
    spec = SpawnSpec(
        entry=target.entry,
        root=target.root,
        cwd=target.folder,
        env=env,
        timeout_seconds=skill.timeout_seconds,
        shown_root=target.shown_root,
        confine=target.confine,
        masker=grant.masker if grant is not None else None,
        sandbox=skill.sandbox,
        skill_class=skill.skill_class.value,
        credentials_dir=grant.directory if grant is not None else None,
        extra_read=extra_read,
    )
    payload = _PAYLOAD(execution.args).encode()
    outcome = await runner.run(spec, payload, emit)
    apply_outcome(execution, outcome)
    emit(Event("status", {"status": execution.status.value}))


def apply_outcome(execution: Execution, outcome: RunOutcome) -> None:
    """Copy a runner's outcome into ``execution`` and stamp its end."""
    execution.status = outcome.status
    execution.result = outcome.result
    execution.result_text = outcome.result_text
    execution.error = outcome.error
    execution.exit_code = outcome.exit_code
    execution.signal = outcome.signal
    execution.stderr_tail = outcome.stderr_tail
    execution.orphans_killed = outcome.orphans_killed
    execution.started_at = outcome.started_at or execution.started_at
    execution.finished_at = time.time()
    execution.duration_ms = outcome.duration_ms
