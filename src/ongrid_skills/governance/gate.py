"""The gate: every permission question of every door, answered here and only here.

Pure functions of a skill, a persona, a caller's role and what the caller confirmed; no I/O, no
store, no registry. The doors (REST, MCP, CLI, web), the agent kernel, the tool export and the
approval desk all ask these functions, so the same call gets the same answer whichever way it
came in:

- :func:`offered` — may this skill be shown to (and run by) this persona and role at all?
- :func:`admit` — what happens to one call: ``run``, ``approve`` (signatures first) or ``deny``.
- :func:`one_confirmation_suffices` — would exactly one human's confirmation let it run now?
- :func:`signer_problem`, :func:`approver_problem` — who may sign which approval request.
- :func:`persona_usable` — may this role start an agent run as this persona in the console?
- :func:`require_role` — does this principal hold at least this role?
- :func:`may_cancel` — may this principal cancel a call or an agent run?

It must never import a door, the manager or the store.
"""

from __future__ import annotations

from typing import Any

from ongrid_skills.errors import Forbidden
from ongrid_skills.governance.policy import (
    MODE_ALLOWS,
    ROLE_ALLOWS,
    Decision,
    decide,
    mode_permits,
)
from ongrid_skills.governance.principal import Principal
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona, pattern_matches
from ongrid_skills.skills.registry import CATALOGUE_TOOLS
from ongrid_skills.skills.schemas import args_problem
from ongrid_skills.types import Role, SkillClass

_ROLE_ORDER = (Role.VIEWER, Role.OPERATOR, Role.ADMIN)


def persona_permits(persona: Persona, skill: Skill) -> bool:
    """Whether a persona's mode and tool lists let it be offered (and run) a skill at all.

    The catalogue tools (``read_skill``, ``search_skills``) pass a persona's whitelist, since
    deferral depends on ``search_skills``; its blacklist still hides them.
    """
    if not mode_permits(persona.permission_mode, skill.skill_class):
        return False
    if skill.name in CATALOGUE_TOOLS and skill.source == "builtin":
        return not any(pattern_matches(p, skill.name) for p in persona.disallowed_tools)
    return persona.permits_tool(skill.name)


def role_permits(role: Role | None, skill_class: SkillClass) -> bool:
    """Whether a role may run or request a class at all (None: a local caller, trusted)."""
    return role is None or skill_class in ROLE_ALLOWS[role]


def offered(skill: Skill, persona: Persona | None, role: Role | None = None) -> bool:
    """Whether ``skill`` is shown to a caller acting as ``persona`` with ``role``.

    Unavailable and instructions skills are still listed (a model reads instructions with
    ``read_skill``; an unavailable skill shows its reason); :func:`admit` refuses to run them.
    """
    if persona is not None and not persona_permits(persona, skill):
        return False
    return role_permits(role, skill.skill_class)


def admit(
    skill: Skill,
    persona: Persona | None,
    *,
    role: Role | None = None,
    confirmed: bool = False,
    allow_dangerous: bool = False,
) -> Decision:
    """The decision for one call: class × persona (mode and lists) × role × confirmation.

    ``confirmed`` is an explicit human confirmation given with the request (it counts as one
    signature); ``allow_dangerous`` is the local break-glass of the CLI. Availability is checked
    too: an unavailable skill is denied with its reason.
    """
    # The mode's refusal is worded by decide(); here only the persona's tool lists.
    if (
        persona is not None
        and mode_permits(persona.permission_mode, skill.skill_class)
        and not persona_permits(persona, skill)
    ):
        return Decision("deny", f"persona {persona.name} is not allowed the tool {skill.name}")
    if not skill.available:
        return Decision("deny", f"skill {skill.name} is unavailable: {skill.unavailable_reason}")
    return decide(
        skill.skill_class,
        mode=persona.permission_mode if persona else None,
        role=role,
        confirmation_required=skill.confirmation_required,
        confirmed=confirmed,
        dangerous_override=allow_dangerous,
    )


def one_confirmation_suffices(
    skill: Skill, persona: Persona | None, principal: Principal, args: Any
) -> bool:
    """Whether asking ``principal`` once ("run this? y/N") is exactly what this call needs.

    True only when the gate asks for an approval without the confirmation and runs the call
    with it (so never for dangerous skills, which need two distinct signers), the principal is a
    human, and the args are valid: nobody is asked to confirm a call that would be refused
    anyway. The MCP door (elicitation), the terminal agent and the CLI ask this one question.
    """
    if not principal.human or skill.skill_class is SkillClass.DANGEROUS:
        return False
    if admit(skill, persona, role=principal.role).action != "approve":
        return False
    if not admit(skill, persona, role=principal.role, confirmed=True).runs:
        return False
    return args_problem(args) is None and not skill.validate(args)


def has_role(principal: Principal, role: Role) -> bool:
    """Whether ``principal`` holds ``role`` or a higher one (viewer < operator < admin)."""
    return _ROLE_ORDER.index(principal.role) >= _ROLE_ORDER.index(role)


def require_role(principal: Principal, role: Role) -> None:
    """Raise :class:`Forbidden` unless ``principal`` holds at least ``role``."""
    if not has_role(principal, role):
        raise Forbidden(f"this needs the {role.value} role; you are {principal.role.value}")


def signer_problem(principal: Principal) -> str | None:
    """Why ``principal`` may not sign or reject any request, or None: only humans with the
    operator or admin role sign; an agent never does."""
    if not principal.human:
        return "an agent can never sign an approval"
    if not principal.can_sign:
        return f"role {principal.role.value} may not sign approvals"
    return None


def approver_problem(
    principal: Principal,
    skill_class: SkillClass,
    requested_by: str,
    started_by: str | None = None,
) -> str | None:
    """Why ``principal`` (a signer) may not approve a ``skill_class`` call requested by
    ``requested_by``, or None: nobody approves their own (said first, whatever the role);
    dangerous calls need admin signers.

    ``started_by``: the human who started the agent run that asked (``requested_by`` is then
    ``agent:<run id>``). They may give the one confirmation of a mutating call of their run (the
    requester's confirmation, SPEC §5), never a signature of a dangerous one: its two signers
    are two admins other than them."""
    if principal.name == requested_by:  # first: the reason that holds whatever the role
        return "nobody approves their own request"
    if skill_class is SkillClass.DANGEROUS and principal.role is not Role.ADMIN:
        return "dangerous skills need signers with the admin role"
    if skill_class is SkillClass.DANGEROUS and principal.name == started_by:
        return "nobody signs a dangerous call of their own agent run"
    return None


def persona_usable(persona: Persona, role: Role) -> bool:
    """Whether ``role`` may start an agent run as ``persona`` in the console: every class the
    persona's mode lets run is one the role may request (a viewer: read-only personas only)."""
    return MODE_ALLOWS[persona.permission_mode] <= ROLE_ALLOWS[role]


def may_cancel(principal: Principal, requested_by: str | None) -> bool:
    """Whether ``principal`` may cancel a call or an agent run: its requester, or a human who
    may sign approvals (operator, admin)."""
    return principal.name == requested_by or principal.can_sign


def requester_signs_first(principal: Principal, skill_class: SkillClass, confirmed: bool) -> bool:
    """Whether a requester's explicit confirmation counts as the first of two signatures: only a
    human admin confirming a dangerous call (SPEC §5), who could have signed it anyway."""
    return (
        confirmed
        and principal.human
        and principal.role is Role.ADMIN
        and skill_class is SkillClass.DANGEROUS
    )
