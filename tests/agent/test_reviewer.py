"""The reviewer (docs/agent.md, "The reviewer") on a real app and store, its persona talking to the
scripted OpenAI-compatible server on loopback: opinions approving and rejecting, a timeout, an
answer without a decision, a failing provider; advisory by default; with
ONGRID_REVIEWER_CONFIRMS_MUTATING=1 an approving opinion runs a mutating call once, a rejecting
one runs nothing, and a dangerous call still needs two humans; a human who signs first wins."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ongrid_skills.agent.reviewer import RULES, STOPPED, decision_of
from ongrid_skills.doors.asgi import create_app
from ongrid_skills.settings import Settings
from ongrid_skills.store import open_store
from tests.support.agent import agent_settings
from tests.support.llm import FakeLLM, Planned, Reply, call
from tests.support.server import Server, running_app
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for

ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
printf '%s\\n' "$input"
"""
SECRET = "reviewer-never-sees-42"
SLOT = {"slot": "api", "fields": ["token"], "inject": {"env": {"API_TOKEN": "{{token}}"}}}
PRINTS = """#!/bin/sh
cat >/dev/null
printf '{"who": "%s"}\\n' "$API_TOKEN"
"""
CONFIRMS = {"reviewer_confirms_mutating": True}
REVIEWER_PROMPT = "You are the gatekeeper: you read requests before humans sign them."


@pytest.fixture
def server_skills(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill(
        "set_flag", ECHO, description="Sets a feature flag on a host.", **{"class": "mutating"}
    )
    make_skill("drop_table", ECHO, description="Drops a table.", **{"class": "dangerous"})
    make_skill("whoami", PRINTS, credentials=[SLOT])
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    write_persona(tmp_path / "personas", "gatekeeper", "read-only", body=REVIEWER_PROMPT)


@pytest.fixture
def reviewer() -> dict[str, Any]:
    """More reviewer settings; a test parametrizes it to change them."""
    return {}


@pytest.fixture
def server_settings(
    tmp_path: Path,
    skills_root: Path,
    server_skills: None,
    fake: FakeLLM,
    reviewer: dict[str, Any],
) -> Settings:
    return agent_settings(tmp_path, skills_root, fake, reviewer_persona="gatekeeper", **reviewer)


def ask(server: Server, skill: str, who: str = "olga", **args: Any) -> dict[str, Any]:
    """A request made over REST (no confirmation): pending, with its approval id."""
    response = server.call("POST", f"/v1/skills/{skill}/execute", who, json={"args": args})
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    assert body["status"] == "pending_approval"
    return body


def approval(server: Server, approval_id: str) -> dict[str, Any]:
    response = server.call("GET", f"/v1/approvals/{approval_id}", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def reviewed(server: Server, approval_id: str) -> dict[str, Any]:
    """The request once its review is finished (done or failed)."""

    def finished() -> dict[str, Any] | None:
        body = approval(server, approval_id)
        review = body.get("review")
        return body if review and review["status"] in ("done", "failed") else None

    return wait_for(finished, f"the review of {approval_id}", 15)


def audit_actions(server: Server, subject: str) -> list[tuple[str, str, dict[str, Any]]]:
    entries = server.store.audit.entries(subject=subject)
    return [(e["actor"], e["action"], e["data"]) for e in reversed(entries)]


def calls_of(skills_root: Path, folder: str) -> list[str]:
    log = skills_root / folder / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def held(gate: threading.Event, reply: Reply) -> Planned:
    """A reply the scripted server sends only once ``gate`` is set (a reviewer still thinking)."""

    def answer(_body: dict[str, Any]) -> Reply:
        gate.wait(15)
        return reply

    return answer


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()  # never leave the scripted server's thread waiting


def test_the_reviewer_reads_an_agent_runs_request_and_its_approving_opinion_is_only_advice(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(
        Reply("I will set it.", [call("set_flag", {"flag": "maintenance"})]),
        Reply("The flag only pauses writes; it is what the user asked.\n**Decision: approve**"),
        Reply("Done."),
    )
    start = server.call(
        "POST", "/v1/agent/runs", "olga", json={"persona": "fixer", "message": "pause db-01"}
    )
    assert start.status_code == 202, start.text
    run_id = start.json()["id"]
    pending = wait_for(
        lambda: server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"],
        "the request",
    )
    body = reviewed(server, pending[0]["id"])
    review = body["review"]
    assert review["persona"] == "gatekeeper" and review["decision"] == "approve"
    assert review["opinion"].startswith("The flag only pauses writes")
    assert review["counted"] is False and review["note"] is None
    # Advisory: nobody signed, nothing ran.
    assert body["status"] == "pending" and body["signatures_collected"] == 0
    assert calls_of(skills_root, "set-flag") == []
    # What the reviewer was sent: its persona and rules, no tool, the skill, the args, the run.
    sent = fake.request(1)
    assert "tools" not in sent
    assert fake.system(1) == f"{REVIEWER_PROMPT}\n\n{RULES}"
    asked = sent["messages"][-1]["content"]
    assert "skill set_flag (class mutating)" in asked
    assert "description: Sets a feature flag on a host." in asked
    assert '"flag": "maintenance"' in asked
    assert "[user] pause db-01" in asked and "calls set_flag(" in asked
    assert ("reviewer:gatekeeper", "approval.reviewed") in [
        (actor, action) for actor, action, _ in audit_actions(server, body["id"])
    ]
    # A human confirms; the run carries on as ever.
    assert server.call("POST", f"/v1/approvals/{body['id']}/approve", "oscar").status_code == 200
    wait_for(
        lambda: server.call("GET", f"/v1/agent/runs/{run_id}", "olga").json()["status"] == "done",
        "the run to end",
    )
    assert calls_of(skills_root, "set-flag") == ['{"flag":"maintenance"}']


def test_the_reviewer_reads_the_run_with_credential_values_masked(
    server: Server, fake: FakeLLM
) -> None:
    made = server.call(
        "POST", "/v1/credentials", "admin", json={"name": "api", "values": {"token": SECRET}}
    )
    assert made.status_code == 201, made.text
    bound = server.call(
        "POST", "/v1/credentials/api/bind", "admin", json={"slot": "api", "skill": "whoami"}
    )
    assert bound.status_code == 200, bound.text
    fake.add(
        Reply(calls=[call("whoami", {})]),
        Reply("Now the flag.", [call("set_flag", {"flag": "on"})]),
        Reply("I saw no secret.\nDecision: approve"),
    )
    started = server.call(
        "POST", "/v1/agent/runs", "olga", json={"persona": "fixer", "message": "who, then flag"}
    )
    assert started.status_code == 202, started.text
    pending = wait_for(
        lambda: server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"],
        "the request",
    )
    reviewed(server, pending[0]["id"])
    asked = fake.request(2)["messages"][-1]["content"]
    # Masked by the credential's masker (an innocent key: redact() alone would not catch it).
    assert '[tool] whoami → succeeded: {"who": "***"}' in asked
    assert SECRET not in json.dumps(fake.request(2))


def test_a_rejecting_opinion_is_recorded_and_changes_nothing(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply("Dropping `orders` loses the shop's data.\nDecision: reject"))
    body = reviewed(server, ask(server, "drop_table", table="orders")["approval_id"])
    assert body["review"]["decision"] == "reject"
    assert body["status"] == "pending" and body["signatures_collected"] == 0
    entries = audit_actions(server, body["id"])
    (data,) = [d for _, action, d in entries if action == "approval.reviewed"]
    assert data["decision"] == "reject" and data["opinion"].startswith("Dropping `orders`")
    assert calls_of(skills_root, "drop-table") == []


@pytest.mark.parametrize("reviewer", [{"reviewer_timeout": 1}])
def test_a_reviewer_that_does_not_answer_in_time_leaves_a_note_and_changes_nothing(
    server: Server, fake: FakeLLM, gate: threading.Event
) -> None:
    fake.add(held(gate, Reply("Too late.\nDecision: approve")))
    body = reviewed(server, ask(server, "set_flag", flag="x")["approval_id"])
    assert body["review"]["status"] == "failed"
    assert body["review"]["note"] == "reviewer failed: no answer within 1 s"
    assert body["review"]["decision"] is None and body["status"] == "pending"


def test_an_answer_without_a_decision_leaves_a_note_and_keeps_the_text(
    server: Server, fake: FakeLLM
) -> None:
    fake.add(Reply("It depends on the time of day. Decision: approve, maybe later."))
    body = reviewed(server, ask(server, "set_flag", flag="x")["approval_id"])
    review = body["review"]
    assert review["status"] == "failed" and review["decision"] is None
    assert review["note"].startswith("reviewer failed: its answer ends without `Decision")
    assert review["opinion"].startswith("It depends")
    assert body["status"] == "pending"


def test_a_failing_provider_leaves_a_note_and_changes_nothing(
    server: Server, fake: FakeLLM
) -> None:
    fake.add(Reply(status=500, error="model overloaded"))
    body = reviewed(server, ask(server, "set_flag", flag="x")["approval_id"])
    assert body["review"]["note"].startswith("reviewer failed: provider error: HTTP 500")
    assert body["status"] == "pending"


@pytest.mark.parametrize("reviewer", [CONFIRMS])
def test_with_confirms_mutating_an_approving_opinion_runs_the_mutating_call_once(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply("Harmless.\nDecision: approve"))
    asked = ask(server, "set_flag", flag="on")
    body = reviewed(server, asked["approval_id"])
    assert body["status"] == "approved" and body["review"]["counted"] is True
    assert [(s["principal"], s["role"]) for s in body["signatures"]] == [
        ("reviewer:gatekeeper", "reviewer")
    ]
    assert server.final(body["execution_id"])["status"] == "succeeded"
    assert calls_of(skills_root, "set-flag") == ['{"flag":"on"}']
    again = server.call("POST", f"/v1/approvals/{body['id']}/approve", "oscar")
    assert again.status_code == 409
    actions = [(actor, action) for actor, action, _ in audit_actions(server, body["id"])]
    assert ("reviewer:gatekeeper", "approval.signed") in actions
    assert ("manager", "approval.approved") in actions
    assert calls_of(skills_root, "set-flag") == ['{"flag":"on"}']  # once


@pytest.mark.parametrize("reviewer", [CONFIRMS])
def test_with_confirms_mutating_a_rejecting_opinion_runs_nothing(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply("Not now.\nDecision: reject"))
    body = reviewed(server, ask(server, "set_flag", flag="on")["approval_id"])
    assert body["status"] == "pending" and body["signatures"] == []
    assert body["review"]["counted"] is False
    assert calls_of(skills_root, "set-flag") == []


@pytest.mark.parametrize("reviewer", [CONFIRMS])
def test_a_reviewer_told_to_approve_a_dangerous_call_still_leaves_two_humans_to_sign(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply("The operator asked for it.\nDecision: approve"))
    asked = ask(server, "drop_table", table="tmp")
    body = reviewed(server, asked["approval_id"])
    assert body["review"]["decision"] == "approve" and body["review"]["counted"] is False
    assert body["status"] == "pending" and body["signatures"] == []
    assert body["signatures_required"] == 2
    first = server.call("POST", f"/v1/approvals/{body['id']}/approve", "admin")
    assert first.json()["status"] == "pending" and first.json()["signatures_collected"] == 1
    assert calls_of(skills_root, "drop-table") == []
    second = server.call("POST", f"/v1/approvals/{body['id']}/approve", "admin2")
    assert second.json()["status"] == "approved"
    assert server.final(body["execution_id"])["status"] == "succeeded"
    assert calls_of(skills_root, "drop-table") == ['{"table":"tmp"}']


@pytest.mark.parametrize("reviewer", [CONFIRMS])
def test_a_human_who_confirms_before_the_reviewer_answers_decides_and_the_opinion_counts_nothing(
    server: Server, fake: FakeLLM, skills_root: Path, gate: threading.Event
) -> None:
    fake.add(held(gate, Reply("Fine.\nDecision: approve")))
    asked = ask(server, "set_flag", flag="on")
    fake.wait_requests(1)  # the reviewer is thinking
    assert approval(server, asked["approval_id"])["review"]["status"] == "reviewing"
    signed = server.call("POST", f"/v1/approvals/{asked['approval_id']}/approve", "oscar")
    assert signed.json()["status"] == "approved"
    gate.set()
    body = reviewed(server, asked["approval_id"])
    assert body["review"]["decision"] == "approve" and body["review"]["counted"] is False
    assert [s["principal"] for s in body["signatures"]] == ["oscar"]
    assert server.final(body["execution_id"])["status"] == "succeeded"
    assert calls_of(skills_root, "set-flag") == ['{"flag":"on"}']


def test_a_review_cut_short_by_a_stop_says_so_at_the_next_start(
    server_settings: Settings, fake: FakeLLM, gate: threading.Event
) -> None:
    fake.add(held(gate, Reply("Too late.\nDecision: approve")))
    with running_app(server_settings) as first:
        approval_id = ask(first, "set_flag", flag="x")["approval_id"]
        fake.wait_requests(1)
        assert approval(first, approval_id)["review"]["status"] == "reviewing"
    gate.set()
    store = open_store(server_settings.data_dir, None)
    try:  # the same data dir served again (its tokens are still there)
        app = create_app(server_settings, store=store, loader_sink=lambda _line: None)
        with TestClient(app):
            again = store.approvals.get(approval_id)
    finally:
        store.close()
    assert again is not None and again.review is not None
    assert (again.review.status, again.review.note) == ("failed", STOPPED)
    assert again.status == "pending"


def test_a_decision_is_read_from_the_last_line_only() -> None:
    assert decision_of("ok\n\n`Decision: Reject.`\n") == "reject"
    assert decision_of("Decision: approve\nbut wait") is None
    assert decision_of("") is None
