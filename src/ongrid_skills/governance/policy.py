"""The permission table: a pure function of class × persona mode × role × confirmation.

The tables of SPEC §5 and :func:`decide`, which reads them. Nobody outside governance asks it
directly: :mod:`ongrid_skills.governance.gate` adds the persona's tool lists and the skill's
availability and is what every door calls. It must never do I/O or import anything but types.

>>> decide(SkillClass.SAFE).action
'run'
>>> decide(SkillClass.MUTATING, mode=PermissionMode.READ_ONLY).action
'deny'
>>> decide(SkillClass.MUTATING).action, decide(SkillClass.MUTATING, confirmed=True).action
('approve', 'run')
>>> d = decide(SkillClass.DANGEROUS, mode=PermissionMode.DUAL_SIGN, confirmed=True)
>>> d.action, d.signatures_required, d.signatures_missing
('approve', 2, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from ongrid_skills.types import PermissionMode, Role, SkillClass

#: The classes each persona mode lets run at all (SPEC §5).
MODE_ALLOWS: dict[PermissionMode, frozenset[SkillClass]] = {
    PermissionMode.READ_ONLY: frozenset({SkillClass.SAFE}),
    PermissionMode.MUTATING_WITH_CONFIRM: frozenset({SkillClass.SAFE, SkillClass.MUTATING}),
    PermissionMode.DUAL_SIGN: frozenset(SkillClass),
}

#: The classes each role may run or request.
ROLE_ALLOWS: dict[Role, frozenset[SkillClass]] = {
    Role.VIEWER: frozenset({SkillClass.SAFE}),
    Role.OPERATOR: frozenset(SkillClass),
    Role.ADMIN: frozenset(SkillClass),
}

#: Human signatures a class needs before it runs.
SIGNATURES: dict[SkillClass, int] = {
    SkillClass.SAFE: 0,
    SkillClass.MUTATING: 1,
    SkillClass.DANGEROUS: 2,
}


def signatures_for(skill_class: SkillClass, confirmation_required: bool) -> int:
    """The human signatures a skill needs before it runs, whoever asks (a confirmation counts).

    >>> signatures_for(SkillClass.SAFE, True), signatures_for(SkillClass.DANGEROUS, False)
    (1, 2)
    """
    required = SIGNATURES[skill_class]
    return max(required, 1) if confirmation_required else required


@dataclass(frozen=True, slots=True)
class Decision:
    """``action`` is ``run``, ``approve`` (signatures needed first) or ``deny``."""

    action: str
    reason: str
    signatures_required: int = 0
    signatures_missing: int = 0

    @property
    def runs(self) -> bool:
        """Whether the call may run now, with no signature still missing."""
        return self.action == "run"


def mode_permits(mode: PermissionMode, skill_class: SkillClass) -> bool:
    """Whether a persona mode lets a class run at all (with or without signatures)."""
    return skill_class in MODE_ALLOWS[mode]


def decide(
    skill_class: SkillClass,
    *,
    mode: PermissionMode | None = None,
    role: Role | None = None,
    confirmation_required: bool = False,
    confirmed: bool = False,
    dangerous_override: bool = False,
) -> Decision:
    """Decide what happens to one call.

    ``mode`` is the persona's permission mode (None: no persona, a human caller); ``role`` the
    caller's role (None: a local caller on the machine, trusted as an operator). ``confirmed`` is
    an explicit human confirmation given with the request; it counts as one signature.
    ``dangerous_override`` is the local break-glass (`--i-know-it-is-dangerous`): together with
    ``confirmed`` it lets a local human run a dangerous skill without a second signer.
    """
    if mode is not None and not mode_permits(mode, skill_class):
        return Decision("deny", f"persona mode {mode.value} does not permit {skill_class} skills")
    if role is not None and skill_class not in ROLE_ALLOWS[role]:
        return Decision("deny", f"role {role.value} may not run {skill_class} skills")
    required = signatures_for(skill_class, confirmation_required)
    if required == 0:
        return Decision("run", f"{skill_class} skills run freely")
    if skill_class is SkillClass.DANGEROUS and dangerous_override and confirmed:
        return Decision("run", "dangerous skill confirmed with the local override", required)
    missing = required - (1 if confirmed else 0)
    if missing <= 0:
        return Decision("run", "confirmed by the requester", required)
    what = "one human confirmation" if required == 1 else f"{required} distinct human signers"
    return Decision("approve", f"{skill_class} skill needs {what}", required, missing)
