"""What a card shows of a request: the buttons the gate's rules leave (the desk decides anyway),
and the asking run's transcript entries as short lines."""

from __future__ import annotations

from ongrid_skills.agent.runs import StoredMessage
from ongrid_skills.doors.web.approval_cards import EXCERPT_CHARS, decision_problems, excerpt
from ongrid_skills.governance.principal import Principal
from ongrid_skills.store.approvals import Approval, Signature
from ongrid_skills.types import Role

ADMIN = Principal("ada", Role.ADMIN)
OPERATOR = Principal("otto", Role.OPERATOR)
VIEWER = Principal("vic", Role.VIEWER)
AGENT = Principal("agent:1234", Role.ADMIN, human=False)


def request(
    skill_class: str = "mutating", requested_by: str = "olga", status: str = "pending"
) -> Approval:
    return Approval(
        id="a" * 32,
        execution_id="e" * 32,
        skill="restart_cache",
        skill_class=skill_class,
        args={},
        definition_hash="0" * 64,
        persona=None,
        requested_by=requested_by,
        signatures_required=1 if skill_class == "mutating" else 2,
        status=status,
        created_at=0.0,
        expires_at=3600.0,
    )


def test_a_signer_who_may_decide_sees_both_buttons() -> None:
    assert decision_problems(request(), OPERATOR) == (None, None)
    assert decision_problems(request("dangerous"), ADMIN) == (None, None)


def test_nobody_is_offered_to_approve_their_own_request_but_may_reject_it() -> None:
    assert decision_problems(request(requested_by="otto"), OPERATOR) == (
        "nobody approves their own request",
        None,
    )


def test_a_dangerous_request_is_offered_to_admins_only() -> None:
    problem, reject = decision_problems(request("dangerous"), OPERATOR)
    assert problem == "dangerous skills need signers with the admin role"
    assert reject is None  # the desk lets any signer reject


def test_viewers_agents_and_those_who_signed_are_offered_nothing() -> None:
    signed = request()
    signed.signatures.append(Signature("otto", "operator", "approve", 1.0))
    for who, why in [
        (VIEWER, "role viewer may not sign approvals"),
        (AGENT, "an agent can never sign an approval"),
    ]:
        assert decision_problems(request(), who) == (why, why)
    assert decision_problems(signed, OPERATOR) == ("you signed this request already",) * 2


def test_a_closed_request_offers_no_decision() -> None:
    assert decision_problems(request(status="expired"), ADMIN) == ("the request is expired",) * 2


def test_transcript_entries_become_short_lines() -> None:
    def said(role: str, **content: object) -> StoredMessage:
        return StoredMessage(1, role, dict(content), 0.0)

    call = {"id": "c1", "name": "restart_cache", "arguments": '{"service": "c-1"}'}
    assistant = excerpt(said("assistant", text="Restarting.", tool_calls=[call]))
    assert assistant.text == 'Restarting.\ncalls restart_cache({"service": "c-1"})'
    tool = excerpt(said("tool", name="probe", status="failed", content='{"error": 1}'))
    assert tool.text == 'probe → failed: {"error": 1}'
    pending = excerpt(said("pending", name="probe", approval_id="ab12"))
    assert pending.text == "probe waits for approval ab12"
    long = excerpt(said("user", text="x" * (EXCERPT_CHARS + 1)))
    assert (len(long.text), long.cut) == (EXCERPT_CHARS, True)
    assert excerpt(said("user", text="short")).cut is False
