"""The REST routes of SPEC §9 on a real app, store and skills (TestClient), plus SSE on `serve`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.execution.records import Status
from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.server import ServeProcess, Server, ServerCheck, start_serve, stop
from tests.support.skills import MakeSkill, write_persona, write_skill
from tests.support.waiting import wait_for

ECHO = "#!/bin/sh\necho 'reading args' >&2\nexec cat\n"
ECHO_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "msg": {"type": "string"}},
    "additionalProperties": False,
}
SUMMARY_FIELDS = {
    "name",
    "description",
    "class",
    "category",
    "kind",
    "source",
    "schema",
    "timeout_seconds",
    "available",
    "unavailable_reason",
    "when_to_use",
    "extra",  # what a SKILL.md author declared (license, allowed-tools…), or null
    "scope",  # manager, or host (run by an edge worker; SPEC §17)
}
EXECUTION_FIELDS = {
    "id",
    "skill",
    "status",
    "args",
    "result",
    "error",
    "exit_code",
    "stderr_tail",
    "persona",
    "requested_by",
    "approval_id",
    "created_at",
    "started_at",
    "finished_at",
    "duration_ms",
}


def gate_script(gate: Path) -> str:
    return (
        "#!/bin/sh\ncat >/dev/null\necho 'started' >&2\n"
        f"while [ ! -e '{gate}' ]; do sleep 0.01; done\necho '{{\"ok\": true}}'\n"
    )


@pytest.fixture
def server_skills(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill(
        "echo_args", ECHO, category="diag", description="Echo the ARGS back", schema=ECHO_SCHEMA
    )
    make_skill(
        "disk_clean", category="disk", description="Free disk space", **{"class": "mutating"}
    )
    make_skill(
        "reboot_host", category="host", description="Reboot a host", **{"class": "dangerous"}
    )
    runs = tmp_path / "runs.log"
    make_skill(
        "count_runs",
        f"#!/bin/sh\ncat >/dev/null\necho run >> '{runs}'\necho '{{\"ok\": true}}'\n",
        category="diag",
        description="Count its runs",
    )
    make_skill("wait_gate", gate_script(tmp_path / "gate"), description="Wait for the gate")
    personas = tmp_path / "personas"
    write_persona(personas, "reader", tools=["echo_args", "count_runs", "disk_clean"])
    write_persona(personas, "fixer", "mutating-with-confirm", disallowed_tools=["reboot_*"])


def still_healthy(srv: Server) -> None:
    assert srv.client.get("/v1/health").status_code == 200
    assert srv.store.audit.verify().ok


@pytest.fixture
def server_checks() -> list[ServerCheck]:
    return [still_healthy]


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert isinstance(body["error"]["details"], list)
    return body["error"]


def execute(srv: Server, name: str, who: str = "admin", **body: Any) -> httpx.Response:
    return srv.call("POST", f"/v1/skills/{name}/execute", who, json=body)


# ---- health and authentication ---------------------------------------------------------------
PROTECTED = [
    ("GET", "/v1/skills"),
    ("GET", "/v1/skills/echo_args"),
    ("POST", "/v1/skills/echo_args/execute"),
    ("GET", "/v1/executions"),
    ("GET", "/v1/executions/nope"),
    ("GET", "/v1/executions/nope/events"),
    ("POST", "/v1/executions/nope/cancel"),
    ("GET", "/v1/approvals"),
    ("GET", "/v1/approvals/nope"),
    ("POST", "/v1/approvals/nope/approve"),
    ("POST", "/v1/approvals/nope/reject"),
    ("GET", "/v1/personas"),
    ("GET", "/v1/personas/default"),
    ("GET", "/v1/personas/default/tools"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/audit/verify"),
    ("POST", "/v1/reload"),
    ("GET", "/metrics"),
]


def test_health_answers_without_a_token_with_counts(server: Server) -> None:
    response = server.client.get("/v1/health")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["skills"] == 5
    assert body["personas"] == 4  # default + coordinator (bundled) + reader + fixer
    assert body["running"] == 0
    assert body["loader_errors"] == 0


def test_every_other_route_answers_401_without_a_token(server: Server) -> None:
    for method, path in PROTECTED:
        response = server.client.request(method, path, json={})
        error_of(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"


BAD_AUTHORIZATIONS = [
    "Bearer ogs_not-a-real-token",
    "Basic YWRtaW46YWRtaW4=",
    "Bearer",
    "Bearer    ",
    "ogs_x",
    "bearer " + "x" * 600,
]


def test_every_other_route_answers_401_with_a_bad_token(server: Server) -> None:
    for authorization in BAD_AUTHORIZATIONS:
        for method, path in PROTECTED:
            response = server.client.request(
                method, path, json={}, headers={"Authorization": authorization}
            )
            error_of(response, 401, "unauthorized")


def test_the_bearer_scheme_is_case_insensitive(server: Server) -> None:
    token = server.tokens["vera"]
    response = server.client.get("/v1/skills", headers={"Authorization": f"bearer {token}"})
    assert response.status_code == 200


def test_a_revoked_token_is_refused_on_every_route(server: Server) -> None:
    assert server.call("GET", "/v1/skills", "vera").status_code == 200
    assert server.store.tokens.revoke("vera")
    server.client.app.state.auth.forget()  # type: ignore[attr-defined]
    for method, path in PROTECTED:
        response = server.client.request(method, path, json={}, headers=server.as_("vera"))
        error_of(response, 401, "unauthorized")
    assert server.call("GET", "/v1/skills", "olga").status_code == 200


# ---- roles ----------------------------------------------------------------------------------
def test_a_viewer_may_run_a_safe_skill(server: Server) -> None:
    response = execute(server, "echo_args", "vera", args={"n": 1})
    assert response.status_code == 200
    assert response.json()["status"] == "succeeded"


def test_a_viewer_may_not_run_a_mutating_or_dangerous_skill(server: Server) -> None:
    for skill in ("disk_clean", "reboot_host"):
        response = execute(server, skill, "vera", args={}, confirm=True)
        error_of(
            response, 403, "denied"
        )  # the gate refuses the skill; the route is open to viewers
        rows = server.call("GET", "/v1/executions", params={"skill": skill}).json()["items"]
        assert [r["status"] for r in rows] == ["denied"]
        assert rows[0]["started_at"] is None


def test_only_an_admin_may_reload(server: Server) -> None:
    for who in ("olga", "vera"):
        error_of(server.call("POST", "/v1/reload", who), 403, "forbidden")
    assert server.call("POST", "/v1/reload", "admin2").status_code == 200


def test_a_viewer_may_not_sign_an_approval(server: Server) -> None:
    pending = execute(server, "disk_clean", "olga", args={}).json()
    response = server.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "vera")
    error_of(response, 403, "forbidden")


# ---- 404s -----------------------------------------------------------------------------------
NOT_FOUND: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/skills/no_such_skill", None),
    ("POST", "/v1/skills/no_such_skill/execute", {"args": {}}),
    ("GET", "/v1/executions/0123456789abcdef", None),
    ("GET", "/v1/executions/0123456789abcdef/events", None),
    ("POST", "/v1/executions/0123456789abcdef/cancel", None),
    ("GET", "/v1/approvals/0123456789abcdef", None),
    ("POST", "/v1/approvals/0123456789abcdef/approve", None),
    ("POST", "/v1/approvals/0123456789abcdef/reject", None),
    ("GET", "/v1/personas/no_such_persona", None),
    ("GET", "/v1/personas/no_such_persona/tools", None),
    ("GET", "/v1/skills?persona=no_such_persona", None),
    ("POST", "/v1/skills/echo_args/execute", {"args": {}, "persona": "no_such_persona"}),
    ("GET", "/v1/no/such/route", None),
]


def test_unknown_things_answer_404(server: Server) -> None:
    for method, path, body in NOT_FOUND:
        error_of(server.call(method, path, "olga", json=body), 404, "not_found")


def test_an_unknown_skill_creates_no_execution_but_an_audit_entry(server: Server) -> None:
    execute(server, "no_such_skill", "olga", args={})
    assert server.call("GET", "/v1/executions").json()["items"] == []
    refused = server.call("GET", "/v1/audit", params={"action": "execution.refused"}).json()
    assert [e["actor"] for e in refused["items"]] == ["olga"]


# ---- skills -----------------------------------------------------------------------------------
def test_list_skills_returns_items_and_total_sorted_by_name_with_every_summary_field(
    server: Server,
) -> None:
    body = server.call("GET", "/v1/skills", "vera").json()
    assert set(body) == {"items", "total"}
    names = [s["name"] for s in body["items"]]
    assert names == ["count_runs", "disk_clean", "echo_args", "reboot_host", "wait_gate"]
    assert body["total"] == 5
    for item in body["items"]:
        assert set(item) == SUMMARY_FIELDS
    echo = body["items"][2]
    assert echo == {
        "name": "echo_args",
        "description": "Echo the ARGS back",
        "class": "safe",
        "category": "diag",
        "kind": "subprocess",
        "source": "external",
        "schema": ECHO_SCHEMA,
        "timeout_seconds": 30,
        "available": True,
        "unavailable_reason": None,
        "when_to_use": None,
        "extra": None,
        "scope": "manager",
    }


SKILL_FILTERS: list[tuple[dict[str, str], list[str]]] = [
    ({"category": "diag"}, ["count_runs", "echo_args"]),
    ({"category": "nowhere"}, []),
    ({"class": "mutating"}, ["disk_clean"]),
    ({"class": "dangerous"}, ["reboot_host"]),
    ({"class": "safe", "category": "diag"}, ["count_runs", "echo_args"]),
    ({"q": "args"}, ["echo_args"]),  # the description matches case-insensitively
    ({"q": "DISK"}, ["disk_clean"]),
    ({"q": "reboot"}, ["reboot_host"]),
    ({"q": "zzz"}, []),
    ({"persona": "default"}, ["count_runs", "echo_args", "wait_gate"]),
    ({"persona": "reader"}, ["count_runs", "echo_args"]),  # whitelist ∩ read-only
    ({"persona": "fixer"}, ["count_runs", "disk_clean", "echo_args", "wait_gate"]),
    ({"persona": "fixer", "class": "mutating"}, ["disk_clean"]),
]


def test_list_skills_filters_by_category_class_query_and_persona(server: Server) -> None:
    for query, expected in SKILL_FILTERS:
        body = server.call("GET", "/v1/skills", "vera", params=query).json()
        assert [s["name"] for s in body["items"]] == expected, query
        assert body["total"] == len(expected), query


def test_list_skills_refuses_an_unknown_class(server: Server) -> None:
    error_of(server.call("GET", "/v1/skills", params={"class": "evil"}), 400, "invalid_request")


def test_get_skill_returns_one_summary(server: Server) -> None:
    body = server.call("GET", "/v1/skills/disk_clean", "vera").json()
    assert set(body) == SUMMARY_FIELDS | {"extra"}  # extra: unknown SKILL.md keys, or null
    assert body["extra"] is None
    assert (body["name"], body["class"], body["category"]) == ("disk_clean", "mutating", "disk")


# ---- execute ----------------------------------------------------------------------------------
def test_execute_answers_200_with_the_whole_execution(server: Server) -> None:
    before = time.time()
    response = execute(server, "echo_args", "olga", args={"n": 7, "msg": "héllo"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) >= EXECUTION_FIELDS
    assert len(body["id"]) >= 16
    assert body["skill"] == "echo_args"
    assert body["status"] == "succeeded"
    assert body["args"] == {"n": 7, "msg": "héllo"}
    assert body["result"] == {"n": 7, "msg": "héllo"}
    assert body["error"] is None
    assert body["exit_code"] == 0
    assert "reading args" in body["stderr_tail"]
    assert body["persona"] is None
    assert body["requested_by"] == "olga"
    assert body["approval_id"] is None
    for key in ("created_at", "started_at", "finished_at"):
        assert body[key].endswith("Z")
    assert body["created_at"] <= body["started_at"] <= body["finished_at"]
    assert isinstance(body["duration_ms"], int | float)
    assert 0 <= body["duration_ms"] <= (time.time() - before) * 1000 + 1
    assert server.call("GET", f"/v1/executions/{body['id']}", "vera").json() == body


def test_execute_accepts_params_as_an_alias_of_args(server: Server) -> None:
    body = execute(server, "echo_args", params={"n": 3}).json()
    assert body["status"] == "succeeded"
    assert body["args"] == body["result"] == {"n": 3}


def test_execute_without_args_sends_an_empty_object(server: Server) -> None:
    body = execute(server, "echo_args").json()
    assert body["args"] == body["result"] == {}


def test_execute_with_both_args_and_params_is_a_bad_request(server: Server) -> None:
    error = error_of(execute(server, "echo_args", args={}, params={}), 400, "invalid_request")
    assert "args or params" in error["message"]
    assert server.call("GET", "/v1/executions").json()["items"] == []


def test_execute_as_a_persona_records_the_persona(server: Server) -> None:
    body = execute(server, "echo_args", "olga", args={}, persona="reader").json()
    assert (body["status"], body["persona"]) == ("succeeded", "reader")


def test_execute_without_waiting_answers_202_running_then_finishes(
    server: Server, tmp_path: Path
) -> None:
    response = execute(server, "wait_gate", "olga", args={}, wait=False)
    assert response.status_code == 202
    running = response.json()
    assert running["status"] == "running"
    assert running["finished_at"] is None
    assert server.call("GET", f"/v1/executions/{running['id']}").json()["status"] == "running"
    (tmp_path / "gate").touch()
    done = server.final(running["id"], "admin")
    assert done["status"] == "succeeded"
    assert done["result"] == {"ok": True}
    assert done["stderr_tail"] == "started\n"


def test_invalid_args_answer_400_with_details_and_record_an_invalid_args_execution(
    server: Server,
) -> None:
    response = execute(server, "echo_args", "olga", args={"n": "seven", "extra": 1})
    error = error_of(response, 400, "invalid_args")
    assert error["details"]
    for detail in error["details"]:
        assert set(detail) >= {"pointer", "message"}
    assert "/n" in [d["pointer"] for d in error["details"]]
    rows = server.call("GET", "/v1/executions", params={"status": "invalid_args"}).json()
    [row] = rows["items"]
    assert row["skill"] == "echo_args"
    assert row["args"] == {"n": "seven", "extra": 1}
    assert row["error"]["code"] == "invalid_args"
    assert row["started_at"] is None


def test_a_persona_denial_answers_403_denied_and_is_recorded(server: Server) -> None:
    for persona, skill in [
        ("reader", "disk_clean"),
        ("reader", "wait_gate"),
        ("fixer", "reboot_host"),
    ]:
        response = execute(server, skill, "admin", args={}, persona=persona, confirm=True)
        error_of(response, 403, "denied")
        [row] = server.call("GET", "/v1/executions", params={"skill": skill}).json()["items"]
        assert (row["status"], row["persona"]) == ("denied", persona)


def test_a_failing_skill_is_a_200_with_status_failed(server: Server, make_skill: MakeSkill) -> None:
    make_skill("broken", "#!/bin/sh\ncat >/dev/null\necho 'oops' >&2\nexit 3\n")
    assert server.call("POST", "/v1/reload").status_code == 200
    body = execute(server, "broken", args={}).json()
    assert (body["status"], body["exit_code"]) == ("failed", 3)
    assert body["error"]["code"] == "exit_status"
    assert body["stderr_tail"] == "oops\n"


# ---- approvals -------------------------------------------------------------------------------
def test_a_mutating_call_without_confirm_waits_for_approval_then_runs_when_signed(
    server: Server,
) -> None:
    response = execute(server, "disk_clean", "olga", args={})
    assert response.status_code == 202
    pending = response.json()
    assert pending["status"] == "pending_approval"
    approval_id = pending["approval_id"]
    inbox = server.call("GET", "/v1/approvals", "vera", params={"status": "pending"}).json()
    assert [a["id"] for a in inbox["items"]] == [approval_id]
    assert inbox["items"][0]["signatures_required"] == 1
    one = server.call("GET", f"/v1/approvals/{approval_id}", "vera").json()
    assert (one["skill"], one["requested_by"], one["status"]) == ("disk_clean", "olga", "pending")
    own = server.call("POST", f"/v1/approvals/{approval_id}/approve", "olga")
    error_of(own, 403, "forbidden")
    signed = server.call(
        "POST", f"/v1/approvals/{approval_id}/approve", "oscar", json={"comment": "ok"}
    )
    assert signed.status_code == 200
    assert signed.json()["status"] == "approved"
    assert server.final(pending["id"], "admin")["status"] == "succeeded"
    again = server.call("POST", f"/v1/approvals/{approval_id}/approve", "admin")
    error_of(again, 409, "conflict")


def test_a_mutating_call_with_confirm_runs_at_once(server: Server) -> None:
    body = execute(server, "disk_clean", "olga", args={}, confirm=True).json()
    assert body["status"] == "succeeded"
    assert body["approval_id"] is None


def test_a_rejected_request_never_runs(server: Server) -> None:
    pending = execute(server, "disk_clean", "olga", args={}).json()
    response = server.call("POST", f"/v1/approvals/{pending['approval_id']}/reject", "oscar")
    assert response.status_code == 200
    assert response.json()["status"] == "rejected"
    done = server.call("GET", f"/v1/executions/{pending['id']}").json()
    assert done["status"] == "rejected"
    assert done["started_at"] is None


def test_a_dangerous_call_needs_an_admin_as_second_signer(server: Server) -> None:
    pending = execute(server, "reboot_host", "admin", args={}, confirm=True).json()
    assert pending["status"] == "pending_approval"
    approval = server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert (approval["signatures_required"], approval["signatures_collected"]) == (2, 1)
    path = f"/v1/approvals/{pending['approval_id']}/approve"
    error_of(server.call("POST", path, "oscar"), 403, "forbidden")
    error_of(server.call("POST", path, "admin"), 403, "forbidden")
    assert server.call("POST", path, "admin2").json()["status"] == "approved"
    assert server.final(pending["id"], "admin")["status"] == "succeeded"


# ---- cancel ----------------------------------------------------------------------------------
def test_the_requester_cancels_a_running_call_and_a_viewer_may_not(server: Server) -> None:
    running = execute(server, "wait_gate", "vera", args={}, wait=False).json()
    cancel = f"/v1/executions/{running['id']}/cancel"
    other_viewer = server.store.tokens.create("vic", Role.VIEWER)[0]
    response = server.client.post(cancel, headers={"Authorization": f"Bearer {other_viewer}"})
    error_of(response, 403, "forbidden")
    response = server.call("POST", cancel, "vera")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["error"]["code"] == "cancelled"
    error_of(server.call("POST", cancel, "vera"), 409, "conflict")


def test_cancelling_a_pending_request_closes_it(server: Server) -> None:
    pending = execute(server, "disk_clean", "olga", args={}).json()
    response = server.call("POST", f"/v1/executions/{pending['id']}/cancel", "olga")
    assert response.json()["status"] == "cancelled"
    approval = server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert approval["status"] == "cancelled"


# ---- executions list ---------------------------------------------------------------------------
def test_list_executions_is_newest_first_and_filters_by_skill_and_status(server: Server) -> None:
    ids = [execute(server, "echo_args", args={"n": i}).json()["id"] for i in range(3)]
    counted = execute(server, "count_runs", args={}).json()["id"]
    execute(server, "echo_args", args={"n": "bad"})
    body = server.call("GET", "/v1/executions", "vera").json()
    assert set(body) == {"items", "next_cursor"}
    assert body["next_cursor"] is None
    items = body["items"]
    assert [e["id"] for e in items[1:]] == [counted, *reversed(ids)]
    assert items[0]["status"] == "invalid_args"
    stamps = [e["created_at"] for e in items]
    assert stamps == sorted(stamps, reverse=True)
    by_skill = server.call("GET", "/v1/executions", params={"skill": "count_runs"}).json()
    assert [e["id"] for e in by_skill["items"]] == [counted]
    ok = server.call(
        "GET", "/v1/executions", params={"skill": "echo_args", "status": "succeeded"}
    ).json()
    assert [e["id"] for e in ok["items"]] == list(reversed(ids))
    limited = server.call("GET", "/v1/executions", params={"limit": 2}).json()
    assert len(limited["items"]) == 2
    assert limited["next_cursor"]


def test_cursor_pagination_has_no_duplicates_and_no_gaps(server: Server) -> None:
    made = [execute(server, "echo_args", args={"n": i}).json()["id"] for i in range(7)]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        body = server.call("GET", "/v1/executions", "vera", params=params).json()
        seen.extend(e["id"] for e in body["items"])
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
        assert pages < 10
    assert pages == 3
    assert seen == list(reversed(made))


def test_executions_are_listed_by_who_asked(server: Server) -> None:
    olgas = [execute(server, "echo_args", "olga", args={"n": i}).json()["id"] for i in range(2)]
    execute(server, "echo_args", "oscar", args={"n": 9})
    body = server.call("GET", "/v1/executions", "vera", params={"requested_by": "olga"}).json()
    assert [e["id"] for e in body["items"]] == list(reversed(olgas))
    assert {e["requested_by"] for e in body["items"]} == {"olga"}


BAD_LIST_PARAMS: list[dict[str, Any]] = [
    {"cursor": "!!!not-base64!!!"},
    {"cursor": "bnVsbA"},  # base64 of "null"
    {"cursor": "WyJhIl0"},  # base64 of ["a"]
    {"status": "sleeping"},
    {"limit": 0},
    {"limit": 501},
    {"limit": "many"},
    {"requested_by": "x" * 129},
]


def test_list_executions_refuses_bad_parameters_with_400(server: Server) -> None:
    for params in BAD_LIST_PARAMS:
        response = server.call("GET", "/v1/executions", params=params)
        error_of(response, 400, "invalid_request")


# ---- idempotency -----------------------------------------------------------------------------
def test_the_same_idempotency_key_and_args_return_the_stored_execution_without_running_again(
    server: Server, tmp_path: Path
) -> None:
    headers = {**server.as_("olga"), "Idempotency-Key": "order-42"}
    url = "/v1/skills/count_runs/execute"
    first = server.client.post(url, json={"args": {}}, headers=headers)
    second = server.client.post(url, json={"args": {}}, headers=headers)
    assert first.status_code == second.status_code == 200
    assert second.json() == first.json()
    assert (tmp_path / "runs.log").read_text() == "run\n"
    conflict = server.client.post(url, json={"args": {"x": 1}}, headers=headers)
    error_of(conflict, 409, "conflict")
    assert (tmp_path / "runs.log").read_text() == "run\n"
    rows = server.call("GET", "/v1/executions", params={"skill": "count_runs"}).json()
    assert len(rows["items"]) == 1


def test_idempotency_keys_belong_to_their_principal(server: Server, tmp_path: Path) -> None:
    url = "/v1/skills/count_runs/execute"
    for who in ("olga", "oscar"):
        headers = {**server.as_(who), "Idempotency-Key": "same"}
        assert server.client.post(url, json={}, headers=headers).status_code == 200
    assert (tmp_path / "runs.log").read_text() == "run\nrun\n"


# ---- personas, metrics, openapi, reload, audit -------------------------------------------------
def test_list_personas_returns_every_persona_sorted(server: Server) -> None:
    body = server.call("GET", "/v1/personas", "vera").json()
    assert body["total"] == 4
    assert [p["name"] for p in body["items"]] == ["coordinator", "default", "fixer", "reader"]
    assert body["items"][0]["can_delegate"] is True and body["items"][1]["can_delegate"] is False
    fixer = body["items"][2]
    assert fixer["permission_mode"] == "mutating-with-confirm"
    assert fixer["disallowed_tools"] == ["reboot_*"]


def test_get_persona_returns_its_prompt_and_what_it_is_offered(server: Server) -> None:
    body = server.call("GET", "/v1/personas/reader", "vera").json()
    assert body["name"] == "reader"
    assert body["permission_mode"] == "read-only"
    assert body["prompt"] == "You are reader.\n"
    assert body["offered"] == ["count_runs", "echo_args"]


def test_persona_tools_lists_what_the_persona_is_offered_in_each_format(server: Server) -> None:
    path = "/v1/personas/fixer/tools"
    offered = ["count_runs", "disk_clean", "echo_args", "wait_gate"]
    openai = server.call("GET", path, "vera").json()
    assert (openai["format"], openai["total"]) == ("openai", 4)
    assert [t["function"]["name"] for t in openai["tools"]] == offered
    assert {t["type"] for t in openai["tools"]} == {"function"}
    echo = openai["tools"][2]["function"]
    assert (echo["description"], echo["parameters"]) == ("Echo the ARGS back", ECHO_SCHEMA)
    anthropic = server.call("GET", path, "vera", params={"format": "anthropic"}).json()
    assert [t["name"] for t in anthropic["tools"]] == offered
    assert anthropic["tools"][2]["input_schema"] == ECHO_SCHEMA
    mcp = server.call("GET", path, "vera", params={"format": "mcp"}).json()
    hints = {t["name"]: t["annotations"]["readOnlyHint"] for t in mcp["tools"]}
    assert hints == {"count_runs": True, "disk_clean": False, "echo_args": True, "wait_gate": True}
    reader = server.call("GET", "/v1/personas/reader/tools", "vera").json()
    assert [t["function"]["name"] for t in reader["tools"]] == ["count_runs", "echo_args"]
    bad = server.call("GET", path, "vera", params={"format": "xml"})
    error_of(bad, 400, "invalid_request")


def test_metrics_count_executions_by_skill_and_status(server: Server) -> None:
    execute(server, "echo_args", args={})
    execute(server, "echo_args", args={"n": "x"})
    response = server.call("GET", "/metrics", "vera")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'ongrid_executions_total{skill="echo_args",status="succeeded"} 1.0' in text
    assert 'ongrid_executions_total{skill="echo_args",status="invalid_args"} 1.0' in text
    assert "ongrid_skills_loaded 5.0" in text


def test_openapi_needs_a_token_like_every_route_but_health(server: Server) -> None:
    assert server.client.get("/openapi.json").status_code == 401
    # /docs is the console's reference page for a session (tests/doors/web/test_api_docs.py).


def test_a_caller_without_a_token_gets_401_before_its_body_is_even_parsed(
    server: Server,
) -> None:
    for body in (b"{not json", b"[]", b"x" * 1000):
        response = server.client.post(
            "/v1/skills/echo_args/execute",
            content=body,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"


def test_openapi_is_valid_json_listing_the_routes(server: Server) -> None:
    response = server.call("GET", "/openapi.json")
    assert response.status_code == 200
    spec = json.loads(response.text)
    paths = spec["paths"]
    for method, path in [
        ("get", "/v1/health"),
        ("get", "/v1/skills"),
        ("get", "/v1/skills/{name}"),
        ("post", "/v1/skills/{name}/execute"),
        ("get", "/v1/executions"),
        ("get", "/v1/executions/{execution_id}"),
        ("get", "/v1/executions/{execution_id}/events"),
        ("post", "/v1/executions/{execution_id}/cancel"),
        ("get", "/v1/approvals"),
        ("post", "/v1/approvals/{approval_id}/approve"),
        ("post", "/v1/approvals/{approval_id}/reject"),
        ("get", "/v1/personas"),
        ("get", "/v1/personas/{name}"),
        ("get", "/v1/personas/{name}/tools"),
        ("post", "/v1/reload"),
        ("get", "/v1/audit"),
        ("get", "/v1/audit/verify"),
        ("get", "/metrics"),
    ]:
        assert method in paths[path], (method, path)
    execute_body = spec["components"]["schemas"]["ExecuteBody"]
    assert {"args", "params", "persona", "confirm", "wait"} <= set(execute_body["properties"])


def test_reload_picks_up_a_new_skill_folder(server: Server, skills_root: Path) -> None:
    assert server.call("GET", "/v1/skills/fresh_skill").status_code == 404
    write_skill(skills_root, "fresh_skill", ECHO)
    response = server.call("POST", "/v1/reload", "admin")
    assert response.status_code == 200
    assert response.json() == {"skills": 6, "loader_errors": 0, "skipped": []}
    assert server.call("GET", "/v1/skills/fresh_skill", "vera").json()["name"] == "fresh_skill"
    assert execute(server, "fresh_skill", args={"a": 1}).json()["result"] == {"a": 1}
    entries = server.call("GET", "/v1/audit", params={"action": "registry.reloaded"}).json()
    [entry] = entries["items"]
    assert entry["actor"] == "admin"
    assert entry["data"]["added"] == ["fresh_skill"]


def test_audit_lists_entries_and_verifies(server: Server) -> None:
    execute(server, "echo_args", "olga", args={})
    body = server.call("GET", "/v1/audit", "vera", params={"action": "execution.started"}).json()
    [entry] = body["items"]
    assert entry["actor"] == "olga"
    assert entry["data"]["skill"] == "echo_args"
    verify = server.call("GET", "/v1/audit/verify", "vera").json()
    assert verify["ok"] is True
    assert verify["problems"] == []
    assert verify["entries"] >= 2


# ---- SSE on a real `serve` ---------------------------------------------------------------------
TALKER = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo 'first line' >&2
while [ ! -e "$gate" ]; do sleep 0.01; done
echo 'second line' >&2
echo '{"done": true}'
"""


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str]]:
    base = tmp_path_factory.mktemp("live")
    skills = base / "skills"
    skills.mkdir()
    write_skill(
        skills,
        "talker",
        TALKER,
        schema={"type": "object", "properties": {"gate": {"type": "string"}}},
    )
    data = base / "data"
    store = open_store(str(data), None)
    token = store.tokens.create("olga", Role.OPERATOR)[0]
    store.close()
    process = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)})
    try:
        yield process, token
    finally:
        stop(process)


def sse(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of an SSE stream; comments (pings) are skipped."""
    event, data = "message", []
    for line in response.iter_lines():
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield event, json.loads("\n".join(data))
            event, data = "message", []


def live_client(live: tuple[ServeProcess, str]) -> httpx.Client:
    process, token = live
    return httpx.Client(
        base_url=process.url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx.Timeout(20.0),
    )


def test_events_stream_a_stderr_line_before_the_skill_ends_then_the_status_and_end(
    live: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with live_client(live) as client:
        started = client.post(
            "/v1/skills/talker/execute", json={"args": {"gate": str(gate)}, "wait": False}
        )
        assert started.status_code == 202
        execution_id = started.json()["id"]
        seen: list[tuple[str, dict[str, Any]]] = []
        with client.stream("GET", f"/v1/executions/{execution_id}/events") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            for event, data in sse(response):
                seen.append((event, data))
                if event == "stderr" and data["line"] == "first line":
                    now = client.get(f"/v1/executions/{execution_id}").json()
                    assert now["status"] == "running"
                    gate.touch()  # only now may the skill end
        assert gate.exists()
    kinds = [e for e, _ in seen]
    assert kinds[0] == "status"
    assert seen[0][1]["status"] == "running"
    lines = [d["line"] for e, d in seen if e == "stderr"]
    assert lines == ["first line", "second line"]
    assert ("status", "succeeded") in [(e, d.get("status")) for e, d in seen]
    assert kinds[-1] == "end"
    assert seen[-1][1]["status"] == "succeeded"
    assert seen[-1][1]["result"] == {"done": True}


def test_events_of_a_finished_execution_replay_the_timeline_and_end(
    live: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.touch()
    with live_client(live) as client:
        done = client.post("/v1/skills/talker/execute", json={"args": {"gate": str(gate)}})
        assert done.json()["status"] == "succeeded"
        execution_id = done.json()["id"]
        with client.stream("GET", f"/v1/executions/{execution_id}/events") as response:
            ids: list[int] = []
            events: list[tuple[str, dict[str, Any]]] = []
            event = "message"
            for line in response.iter_lines():
                if line.startswith("id:"):
                    ids.append(int(line[3:].strip()))
                if line.startswith("event:"):
                    event = line[6:].strip()
                if line.startswith("data:"):
                    events.append((event, json.loads(line[5:].strip())))
    assert ids == sorted(ids)
    assert len(ids) == len(set(ids))
    assert [e for e, _ in events] == ["status", "stderr", "stderr", "status", "end"]
    assert events[-1][1]["id"] == execution_id
    assert events[-1][1]["status"] == "succeeded"


def test_events_without_follow_return_what_happened_so_far_and_end(
    live: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with live_client(live) as client:
        started = client.post(
            "/v1/skills/talker/execute", json={"args": {"gate": str(gate)}, "wait": False}
        )
        execution_id = started.json()["id"]
        path = f"/v1/executions/{execution_id}/events"
        with client.stream("GET", path) as response:  # wait for the first line, live
            for event, data in sse(response):
                if event == "stderr":
                    assert data["line"] == "first line"
                    break

        def snapshot() -> list[tuple[str, dict[str, Any]]]:
            with client.stream("GET", path, params={"follow": "false"}) as response:
                return list(sse(response))

        events = snapshot()
        assert [e for e, _ in events] == ["status", "stderr", "end"]
        assert events[-1][1]["status"] == "running"
        assert not gate.exists()
        gate.touch()

        def finished() -> dict[str, Any] | None:
            body = client.get(f"/v1/executions/{execution_id}").json()
            return body if Status(body["status"]).final else None

        assert wait_for(finished, "the talker to finish", timeout=20)["status"] == "succeeded"
        assert [e for e, _ in snapshot()] == ["status", "stderr", "stderr", "status", "end"]


def test_events_with_last_event_id_resume_after_that_event(
    live: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    """A client whose stream broke after event N reconnects with Last-Event-ID: N and gets
    each later event once: live while the call runs, from the store once it has ended."""
    gate = tmp_path / "gate"
    with live_client(live) as client:
        started = client.post(
            "/v1/skills/talker/execute", json={"args": {"gate": str(gate)}, "wait": False}
        )
        path = f"/v1/executions/{started.json()['id']}/events"
        ids: list[str] = []
        with client.stream("GET", path) as response:  # the ids, read from the raw stream
            for line in response.iter_lines():
                if line.startswith("id:"):
                    ids.append(line[3:].strip())
                if line.startswith("data:") and "first line" in line:
                    break
        assert ids == ["1", "2"]  # status running, then the first line
        headers = {"Last-Event-ID": "2"}
        with client.stream("GET", path, headers=headers) as response:
            gate.touch()  # the stream is open: whatever comes now is live or replayed, once
            resumed = list(sse(response))
        assert [e for e, _ in resumed] == ["stderr", "status", "end"], resumed
        assert resumed[0][1]["line"] == "second line"
        with client.stream("GET", path, headers={"Last-Event-ID": "3"}) as response:
            after_end = list(sse(response))
        assert [e for e, _ in after_end] == ["status", "end"]
        assert after_end[0][1]["status"] == "succeeded"
        with client.stream("GET", path, headers={"Last-Event-ID": "99"}) as response:
            assert [e for e, _ in sse(response)] == ["end"]


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_a_last_event_id_that_is_not_an_event_number_is_a_400(
    live: tuple[ServeProcess, str], value: str
) -> None:
    with live_client(live) as client:
        done = client.post("/v1/skills/talker/execute", json={"args": {"gate": "/"}})
        path = f"/v1/executions/{done.json()['id']}/events"
        answer = client.get(path, headers={"Last-Event-ID": value})
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "invalid_request"
