"""The one gate: the same question gets the same answer, whichever door asks it."""

from __future__ import annotations

from typing import Any

import pytest

from ongrid_skills.errors import Forbidden
from ongrid_skills.governance.gate import (
    admit,
    approver_problem,
    may_cancel,
    offered,
    one_confirmation_suffices,
    persona_usable,
    requester_signs_first,
    require_role,
    signer_problem,
)
from ongrid_skills.governance.principal import Principal
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.types import PermissionMode, Role, SkillClass

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


def skill(cls: SkillClass, name: str = "tool", **kw: Any) -> Skill:
    return Skill(name=name, description="d", skill_class=cls, schema=dict(SCHEMA), **kw)


def persona(mode: PermissionMode, **kw: Any) -> Persona:
    return Persona(name="p", description="d", when_to_use="w", permission_mode=mode, **kw)


ADA = Principal("ada", Role.OPERATOR)
ROOT = Principal("root", Role.ADMIN)
AGENT = Principal("agent:p", Role.OPERATOR, human=False)
VIEWER = Principal("vic", Role.VIEWER)
CONFIRM = persona(PermissionMode.MUTATING_WITH_CONFIRM)
DUAL = persona(PermissionMode.DUAL_SIGN)


def test_a_mutating_call_with_valid_args_needs_exactly_one_human_confirmation() -> None:
    assert one_confirmation_suffices(skill(SkillClass.MUTATING), CONFIRM, ADA, {"path": "/x"})


def test_nobody_is_asked_to_confirm_args_the_call_would_refuse() -> None:
    mutating = skill(SkillClass.MUTATING)
    assert not one_confirmation_suffices(mutating, CONFIRM, ADA, {"path": 1})
    assert not one_confirmation_suffices(mutating, CONFIRM, ADA, {"path": "/x", "extra": 1})
    assert not one_confirmation_suffices(mutating, CONFIRM, ADA, {"path": float("nan")})


def test_one_confirmation_never_suffices_for_dangerous_for_agents_or_for_safe() -> None:
    args = {"path": "/x"}
    assert not one_confirmation_suffices(skill(SkillClass.DANGEROUS), DUAL, ROOT, args)
    assert not one_confirmation_suffices(skill(SkillClass.MUTATING), CONFIRM, AGENT, args)
    assert not one_confirmation_suffices(skill(SkillClass.SAFE), CONFIRM, ADA, args)
    required = skill(SkillClass.SAFE, confirmation_required=True)
    assert one_confirmation_suffices(required, CONFIRM, ADA, args)


def test_a_viewer_confirming_a_mutating_call_is_not_enough() -> None:
    assert not one_confirmation_suffices(skill(SkillClass.MUTATING), CONFIRM, VIEWER, {"path": "/"})
    assert admit(skill(SkillClass.MUTATING), None, role=Role.VIEWER, confirmed=True).action == (
        "deny"
    )


def test_the_persona_lists_and_the_role_both_decide_what_is_offered() -> None:
    listed = persona(PermissionMode.DUAL_SIGN, disallowed_tools=("zap_*",))
    assert not offered(skill(SkillClass.SAFE, "zap_cache"), listed)
    assert offered(skill(SkillClass.DANGEROUS, "restart"), listed, Role.ADMIN)
    assert not offered(skill(SkillClass.DANGEROUS, "restart"), listed, Role.VIEWER)
    assert not offered(skill(SkillClass.MUTATING), persona(PermissionMode.READ_ONLY))


def test_the_catalogue_tools_pass_a_whitelist_but_not_a_blacklist() -> None:
    whitelist = persona(PermissionMode.READ_ONLY, tools=("probe_*",))
    search = skill(SkillClass.SAFE, "search_skills", source="builtin")
    assert offered(search, whitelist)
    blacklist = persona(PermissionMode.READ_ONLY, disallowed_tools=("search_*",))
    assert not offered(search, blacklist)


def test_an_unavailable_skill_is_denied_with_its_reason() -> None:
    broken = skill(SkillClass.SAFE, available=False, unavailable_reason="needs jq")
    decision = admit(broken, None)
    assert (decision.action, decision.reason) == ("deny", "skill tool is unavailable: needs jq")


def test_signers_are_humans_with_operator_or_admin_and_never_the_requester() -> None:
    assert signer_problem(AGENT) == "an agent can never sign an approval"
    assert signer_problem(VIEWER) == "role viewer may not sign approvals"
    assert signer_problem(ADA) is None
    assert approver_problem(ADA, SkillClass.DANGEROUS, "bob") == (
        "dangerous skills need signers with the admin role"
    )
    assert approver_problem(ROOT, SkillClass.DANGEROUS, "root") == (
        "nobody approves their own request"
    )
    assert approver_problem(ROOT, SkillClass.DANGEROUS, "bob") is None


def test_an_operator_refused_on_their_own_dangerous_request_is_told_first_that_it_is_theirs() -> (
    None
):
    assert approver_problem(ADA, SkillClass.DANGEROUS, "ada") == (
        "nobody approves their own request"
    )


def test_who_started_an_agent_run_confirms_its_mutating_calls_but_never_signs_a_dangerous_one() -> (
    None
):
    assert approver_problem(ROOT, SkillClass.MUTATING, "agent:r1", started_by="root") is None
    assert approver_problem(ROOT, SkillClass.DANGEROUS, "agent:r1", started_by="root") == (
        "nobody signs a dangerous call of their own agent run"
    )
    assert approver_problem(ROOT, SkillClass.DANGEROUS, "agent:r1", started_by="bob") is None


def test_a_viewer_may_use_read_only_personas_only_and_an_operator_any() -> None:
    read_only = persona(PermissionMode.READ_ONLY)
    assert persona_usable(read_only, Role.VIEWER)
    assert not persona_usable(CONFIRM, Role.VIEWER)
    assert not persona_usable(DUAL, Role.VIEWER)
    assert all(persona_usable(p, Role.OPERATOR) for p in (read_only, CONFIRM, DUAL))


def test_only_a_human_admin_confirming_a_dangerous_call_signs_it_first() -> None:
    assert requester_signs_first(ROOT, SkillClass.DANGEROUS, confirmed=True)
    assert not requester_signs_first(ROOT, SkillClass.DANGEROUS, confirmed=False)
    assert not requester_signs_first(ADA, SkillClass.DANGEROUS, confirmed=True)
    assert not requester_signs_first(ROOT, SkillClass.MUTATING, confirmed=True)


def test_roles_are_ordered_and_cancelling_belongs_to_the_requester_or_a_signer() -> None:
    require_role(ROOT, Role.OPERATOR)
    with pytest.raises(Forbidden, match="needs the admin role; you are operator"):
        require_role(ADA, Role.ADMIN)
    assert may_cancel(VIEWER, "vic")
    assert not may_cancel(VIEWER, "ada")
    assert may_cancel(ADA, "someone")
    assert not may_cancel(AGENT, "someone")
