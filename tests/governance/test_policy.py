"""The gate: every cell of the SPEC §5 table, roles, confirmations and the local override."""

from __future__ import annotations

import pytest

from ongrid_skills.governance.policy import decide
from ongrid_skills.types import PermissionMode, Role, SkillClass

RO, MWC, DUAL = (
    PermissionMode.READ_ONLY,
    PermissionMode.MUTATING_WITH_CONFIRM,
    PermissionMode.DUAL_SIGN,
)
SAFE, MUT, DANGER = SkillClass.SAFE, SkillClass.MUTATING, SkillClass.DANGEROUS


@pytest.mark.parametrize(
    ("skill_class", "mode", "action", "signatures"),
    [
        (SAFE, RO, "run", 0),
        (SAFE, MWC, "run", 0),
        (SAFE, DUAL, "run", 0),
        (MUT, RO, "deny", 0),
        (MUT, MWC, "approve", 1),
        (MUT, DUAL, "approve", 1),
        (DANGER, RO, "deny", 0),
        (DANGER, MWC, "deny", 0),
        (DANGER, DUAL, "approve", 2),
    ],
)
def test_each_class_and_mode_gets_the_decision_of_the_permission_table(
    skill_class: SkillClass, mode: PermissionMode, action: str, signatures: int
) -> None:
    decision = decide(skill_class, mode=mode)
    assert decision.action == action
    assert decision.signatures_required == signatures


def test_a_human_confirmation_is_the_one_signature_a_mutating_call_needs() -> None:
    assert decide(MUT, mode=MWC, confirmed=True).runs
    assert decide(MUT, confirmed=True).runs


def test_a_read_only_persona_refuses_mutating_even_when_confirmed() -> None:
    decision = decide(MUT, mode=RO, confirmed=True)
    assert decision.action == "deny"
    assert "read-only" in decision.reason


def test_a_confirmed_dangerous_call_still_needs_a_second_distinct_signer() -> None:
    decision = decide(DANGER, mode=DUAL, confirmed=True)
    assert decision.action == "approve"
    assert (decision.signatures_required, decision.signatures_missing) == (2, 1)


def test_the_dangerous_override_needs_the_confirmation_too() -> None:
    assert decide(DANGER, dangerous_override=True).action == "approve"
    assert decide(DANGER, dangerous_override=True, confirmed=True).runs


def test_the_dangerous_override_never_beats_a_persona_mode() -> None:
    decision = decide(DANGER, mode=MWC, dangerous_override=True, confirmed=True)
    assert decision.action == "deny"


def test_confirmation_required_makes_a_safe_tool_wait_for_one_confirmation() -> None:
    decision = decide(SAFE, confirmation_required=True)
    assert (decision.action, decision.signatures_required) == ("approve", 1)
    assert decide(SAFE, confirmation_required=True, confirmed=True).runs


@pytest.mark.parametrize("skill_class", [MUT, DANGER])
def test_a_viewer_may_only_run_safe_skills(skill_class: SkillClass) -> None:
    assert decide(SAFE, role=Role.VIEWER).runs
    assert decide(skill_class, role=Role.VIEWER, confirmed=True).action == "deny"


def test_the_stricter_of_role_and_persona_applies() -> None:
    assert decide(MUT, role=Role.ADMIN, mode=RO, confirmed=True).action == "deny"
    assert decide(MUT, role=Role.VIEWER, mode=DUAL, confirmed=True).action == "deny"
    assert decide(MUT, role=Role.OPERATOR, mode=MWC, confirmed=True).runs


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [("read", SAFE), ("write", MUT), ("destructive", DANGER), ("safe", SAFE)],
)
def test_class_aliases_of_skill_md_map_to_the_three_classes(
    alias: str, canonical: SkillClass
) -> None:
    assert SkillClass.parse(alias) is canonical


def test_an_unknown_class_name_is_refused() -> None:
    with pytest.raises(ValueError):
        SkillClass.parse("harmless")
