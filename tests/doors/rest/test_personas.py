"""Personas written at run time through REST (``POST/PUT/DELETE /v1/personas``) on a real app:
admins only, validated like persona files, file and bundled personas read-only, audited, and
used by the gate like any persona at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import Server, ServerCheck
from tests.support.skills import MakeSkill, write_persona

NIGHT: dict[str, Any] = {
    "name": "night_watch",
    "description": "Watches the night shift.",
    "when_to_use": "At night, when the pager rings.",
    "permission_mode": "read-only",
    "tools": ["echo_*", "disk_clean"],
    "prompt": "You watch the night.\n\nNever restart anything.",
}


@pytest.fixture
def server_skills(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill("echo_args", "#!/bin/sh\nexec cat\n", description="Echo the args back")
    make_skill("disk_clean", description="Free disk space", **{"class": "mutating"})
    write_persona(tmp_path / "personas", "ops_file", "mutating-with-confirm")


def still_healthy(srv: Server) -> None:
    assert srv.client.get("/v1/health").status_code == 200
    assert srv.store.audit.verify().ok


@pytest.fixture
def server_checks() -> list[ServerCheck]:
    return [still_healthy]


def audit(server: Server, action: str) -> list[dict[str, Any]]:
    body = server.call("GET", "/v1/audit", params={"action": action}).json()
    items: list[dict[str, Any]] = body["items"]
    return items


def test_an_admin_creates_edits_and_deletes_a_persona_and_each_change_is_audited(
    server: Server,
) -> None:
    created = server.call("POST", "/v1/personas", json=NIGHT)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["name"], body["source"], body["origin"]) == ("night_watch", "stored", "stored")
    assert body["prompt"] == "You watch the night.\n\nNever restart anything.\n"
    assert body["offered"] == ["echo_args"]  # read-only: disk_clean is not offered
    listed = {
        p["name"]: p["source"] for p in server.call("GET", "/v1/personas", "vera").json()["items"]
    }
    assert listed == {
        "coordinator": "bundled",
        "default": "bundled",
        "ops_file": "file",
        "night_watch": "stored",
    }

    edited = server.call(
        "PUT",
        "/v1/personas/night_watch",
        json={**NIGHT, "permission_mode": "mutating-with-confirm", "max_turns": 4},
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["offered"] == ["disk_clean", "echo_args"]
    shown = server.call("GET", "/v1/personas/night_watch", "vera").json()
    assert (shown["permission_mode"], shown["max_turns"]) == ("mutating-with-confirm", 4)

    assert server.call("DELETE", "/v1/personas/night_watch").status_code == 204
    assert server.call("GET", "/v1/personas/night_watch", "vera").status_code == 404
    for action in ("persona.created", "persona.updated", "persona.deleted"):
        [entry] = audit(server, action)
        assert (entry["actor"], entry["subject"]) == ("admin", "night_watch")
    assert audit(server, "persona.updated")[0]["data"]["permission_mode"] == "mutating-with-confirm"


def test_a_stored_persona_may_be_allowed_to_delegate(server: Server) -> None:
    created = server.call("POST", "/v1/personas", json={**NIGHT, "can_delegate": True})
    assert created.status_code == 201, created.text
    assert created.json()["can_delegate"] is True
    listed = server.call("GET", "/v1/personas", "vera").json()["items"]
    assert {p["name"]: p["can_delegate"] for p in listed}["night_watch"] is True


def test_a_stored_persona_gates_calls_at_once_and_its_edit_changes_what_it_may_run(
    server: Server,
) -> None:
    assert server.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    call = {"args": {}, "persona": "night_watch", "confirm": True}
    refused = server.call("POST", "/v1/skills/disk_clean/execute", "olga", json=call)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "denied"
    mode = {**NIGHT, "permission_mode": "mutating-with-confirm"}
    assert server.call("PUT", "/v1/personas/night_watch", json=mode).status_code == 200
    ran = server.call("POST", "/v1/skills/disk_clean/execute", "olga", json=call)
    assert ran.status_code == 200, ran.text
    assert (ran.json()["status"], ran.json()["persona"]) == ("succeeded", "night_watch")


@pytest.mark.parametrize("who", ["olga", "vera"])
def test_only_an_admin_writes_personas(server: Server, who: str) -> None:
    assert server.call("POST", "/v1/personas", who, json=NIGHT).status_code == 403
    assert server.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    assert server.call("PUT", "/v1/personas/night_watch", who, json=NIGHT).status_code == 403
    assert server.call("DELETE", "/v1/personas/night_watch", who).status_code == 403
    assert [e["actor"] for e in audit(server, "persona.created")] == ["admin"]


@pytest.mark.parametrize(
    ("change", "pointer", "says"),
    [
        ({"permission_mode": "yolo"}, "/permission_mode", "permission_mode must be one of"),
        ({"mode": "read-only"}, "/mode", "unknown field 'mode'"),
        ({"name": "Night Watch"}, "/name", "must match [a-z0-9_-]+"),
        ({"name": "night-watch"}, "/name", "snake_case is required here"),
        ({"name": "n" * 65}, "/name", "longer than 64"),
        ({"description": "  "}, "/description", "description is required"),
        ({"tools": "echo_args"}, "/tools", "tools must be a list"),
        ({"disallowed_tools": ["a*b"]}, "/disallowed_tools", "only prefix* or *suffix"),
        ({"max_turns": True}, "/max_turns", "between 1 and 1000"),
        ({"max_turns": 0}, "/max_turns", "between 1 and 1000"),
        ({"model": 4}, "/model", "model must be a string"),
        ({"can_delegate": "yes"}, "/can_delegate", "can_delegate must be true or false"),
        ({"prompt": ["x"]}, "/prompt", "prompt must be a string"),
        ({"prompt": "x" * (64 * 1024 + 1)}, "/prompt", "at most 65536"),
        ({"when_to_use": "w" * 5000}, "/when_to_use", "longer than 4096"),
    ],
)
def test_a_hostile_body_is_refused_with_a_message_naming_its_field(
    server: Server, change: dict[str, Any], pointer: str, says: str
) -> None:
    answer = server.call("POST", "/v1/personas", json={**NIGHT, **change})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    assert says in error["message"]
    assert error["details"] == [{"pointer": pointer, "message": error["message"]}]
    assert audit(server, "persona.created") == []


def test_a_body_that_is_not_one_object_is_refused(server: Server) -> None:
    duplicate = (
        '{"name": "night_watch", "permission_mode": "read-only", '
        '"permission_mode": "dual-sign-required"}'
    )
    cases = [
        (duplicate, 400, "duplicate key"),
        ("[1, 2]", 400, "invalid request body"),
        ("{", 400, "invalid request body"),
        (json.dumps({**NIGHT, "prompt": "x" * (1024 * 1024)}), 413, "over 1048576 bytes"),
    ]
    for content, status, says in cases:
        answer = server.call("POST", "/v1/personas", content=content)  # no type: JSON
        assert answer.status_code == status, (content[:40], answer.text)
        assert says in answer.json()["error"]["message"]
    assert audit(server, "persona.created") == []


def test_file_and_bundled_personas_are_read_only_and_win_their_name(server: Server) -> None:
    clash = server.call("POST", "/v1/personas", json={**NIGHT, "name": "ops_file"})
    assert clash.status_code == 409
    message = clash.json()["error"]["message"]
    assert "ops_file" in message and "read-only" in message and "choose another name" in message
    for method, name in (("PUT", "ops_file"), ("DELETE", "ops_file"), ("DELETE", "default")):
        kw: dict[str, Any] = {"json": {**NIGHT, "name": name}} if method == "PUT" else {}
        answer = server.call(method, f"/v1/personas/{name}", **kw)
        assert answer.status_code == 409, answer.text
        assert "read-only" in answer.json()["error"]["message"]
    assert server.call("POST", "/v1/personas", json={**NIGHT, "name": "default"}).status_code == 409
    assert server.call("GET", "/v1/personas/ops_file", "vera").json()["source"] == "file"


def test_an_unknown_or_taken_name_and_a_rename_are_refused(server: Server) -> None:
    assert (
        server.call("PUT", "/v1/personas/nobody", json=NIGHT | {"name": "nobody"}).status_code
        == 404
    )
    assert server.call("DELETE", "/v1/personas/nobody").status_code == 404
    assert server.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    again = server.call("POST", "/v1/personas", json=NIGHT)
    assert again.status_code == 409
    assert "exists" in again.json()["error"]["message"]
    renamed = server.call("PUT", "/v1/personas/night_watch", json={**NIGHT, "name": "day_watch"})
    assert renamed.status_code == 400
    assert "renamed by creating the new one" in renamed.json()["error"]["message"]
    no_name = {k: v for k, v in NIGHT.items() if k != "name"}
    assert server.call("PUT", "/v1/personas/night_watch", json=no_name).status_code == 200


def test_a_file_persona_added_later_hides_the_stored_one_which_may_still_be_deleted(
    server: Server, tmp_path: Path
) -> None:
    assert server.call("POST", "/v1/personas", json=NIGHT).status_code == 201
    write_persona(tmp_path / "personas", "night_watch", "dual-sign-required")
    assert server.call("POST", "/v1/reload").status_code == 200
    shown = server.call("GET", "/v1/personas/night_watch", "vera").json()
    assert (shown["source"], shown["permission_mode"]) == ("file", "dual-sign-required")
    hidden = server.call("PUT", "/v1/personas/night_watch", json=NIGHT)
    assert hidden.status_code == 409
    assert "read-only" in hidden.json()["error"]["message"]
    assert server.call("DELETE", "/v1/personas/night_watch").status_code == 204  # the stored one
    assert server.call("GET", "/v1/personas/night_watch", "vera").json()["source"] == "file"
    again = server.call("DELETE", "/v1/personas/night_watch")
    assert again.status_code == 409
    assert [e["subject"] for e in audit(server, "persona.deleted")] == ["night_watch"]


@pytest.mark.parametrize("change", ["stricter", "deleted"])
def test_a_pending_request_made_as_a_stored_persona_is_void_once_it_no_longer_admits_it(
    server: Server, change: str
) -> None:
    fixer = {**NIGHT, "permission_mode": "mutating-with-confirm"}
    assert server.call("POST", "/v1/personas", json=fixer).status_code == 201
    asked = server.call(
        "POST", "/v1/skills/disk_clean/execute", "olga", json={"args": {}, "persona": "night_watch"}
    )
    assert asked.status_code == 202, asked.text
    pending = asked.json()
    if change == "stricter":
        assert server.call("PUT", "/v1/personas/night_watch", json=NIGHT).status_code == 200
    else:
        assert server.call("DELETE", "/v1/personas/night_watch").status_code == 204
    signed = server.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
    assert signed.status_code == 409, signed.text
    approval = server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert approval["status"] == "void"
    ended = server.call("GET", f"/v1/executions/{pending['id']}").json()
    assert (ended["status"], ended["error"]["code"]) == ("rejected", "not_permitted")
