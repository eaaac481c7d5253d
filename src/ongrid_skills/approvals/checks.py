"""Whether a request may still run: asked at every signature and again just before the run.

The skill's definition and entry file are unchanged since the request, and the gate still admits
the call for the persona and the requester as they are now (a persona reloaded stricter, a role
lowered or a token revoked since the request voids it). A request that fails is voided here,
through the ledger; the permission itself is always :mod:`ongrid_skills.governance.gate`'s.
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, select

from ongrid_skills.approvals.ledger import Ledger
from ongrid_skills.approvals.runs import Runs
from ongrid_skills.errors import Conflict
from ongrid_skills.governance.gate import admit
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from ongrid_skills.store import Store
from ongrid_skills.store.approvals import Approval
from ongrid_skills.store.models import AgentRunRow
from ongrid_skills.types import Role

#: The prefix of an agent run's principal (``agent:<run id>``, see agent/loop.py).
AGENT_PREFIX = "agent:"
_RUNS = cast(Table, AgentRunRow.__table__)


class Checks:
    """The re-checks of a request against the registry and the tokens as they are now."""

    def __init__(self, runs: Runs, store: Store, ledger: Ledger) -> None:
        self.runs = runs
        self.store = store
        self.ledger = ledger

    def admissible(self, approval: Approval, *, pending: bool = True) -> Skill:
        """The skill as signed, if the call may still run; else void the request and raise.

        Asked at every signature and again just before the run: the skill's definition and
        entry file are unchanged, and the gate still admits the call for the persona and the
        requester as they are now (a persona reloaded stricter, a role lowered or a token
        revoked since the request voids it). ``pending=False``: the request is already approved.
        """
        registry = self.runs.registry  # one snapshot: the skill returned is the one checked
        void = self.void_reason(approval, registry)
        if void is None:
            return registry.get(approval.skill)
        code, reason = void
        self.ledger.close(approval, "void", "manager", reason, pending=pending, code=code)
        raise Conflict(reason)

    def void_reason(self, approval: Approval, registry: Registry) -> tuple[str, str] | None:
        """(error code, reason) when the request may no longer run on ``registry``, else None."""
        skill = registry.skills.get(approval.skill)
        moved = skill is not None and skill.target is not None and skill.target.changed_on_disk()
        if skill is None or moved or skill.definition_hash != approval.definition_hash:
            return "skill_changed", "the skill changed since the request; the request is void"
        if skill.credentials or approval.credentials:
            now = self.runs.credential_names(skill)
            if now != (approval.credentials or {}):
                reason = "a credential slot was rebound since the request; the request is void"
                return "credentials_changed", reason
        persona = None
        if approval.persona is not None:
            persona = registry.personas.get(approval.persona)
            if persona is None:
                reason = f"persona {approval.persona} no longer exists; the request is void"
                return "not_permitted", reason
        role, revoked = self.requester_role(approval)
        if revoked is not None:
            return "not_permitted", f"{revoked}; the request is void"
        decision = admit(skill, persona, role=role)
        if decision.action == "deny":
            return "not_permitted", f"{decision.reason}; the request is void"
        return None

    def requester_role(self, approval: Approval) -> tuple[Role | None, str | None]:
        """(the requester's role now, None) — their token's, when they hold one, else the role
        recorded with the request (local principals such as ``cli:<user>`` hold no token) —
        or (None, why) when every token of that name has been revoked."""
        tokens = self.store.tokens.named(approval.requested_by)
        if tokens:
            active = [t for t in tokens if t.revoked_at is None]
            if not active:
                return None, f"the requester's token ({approval.requested_by}) was revoked"
            return active[-1].role, None
        return (Role(approval.requested_role) if approval.requested_role else None), None

    def run_starter(self, approval: Approval) -> str | None:
        """Who started the agent run that asked (its requester is ``agent:<run id>``), or None
        for a request a human or a client made directly."""
        if not approval.requested_by.startswith(AGENT_PREFIX):
            return None
        run_id = approval.requested_by.removeprefix(AGENT_PREFIX)
        with self.store.read() as conn:
            found = conn.execute(select(_RUNS.c.requested_by).where(_RUNS.c.id == run_id)).first()
        return None if found is None else str(found[0])
