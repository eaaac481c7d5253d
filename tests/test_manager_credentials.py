"""A call runs with the credentials it was admitted (or approved) with: a slot rebound while the
call waits in the queue fails it with ``credentials_changed``, and nothing runs."""

from __future__ import annotations

from pathlib import Path

from tests.support.server import make_settings, running_app
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

SLOT = {"slot": "api", "fields": ["token"], "inject": {"env": {"API_TOKEN": "{{token}}"}}}


def test_a_slot_rebound_while_the_call_is_queued_fails_it_unrun(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    gate, ran = tmp_path / "gate", tmp_path / "ran"
    make_skill(
        "blocker",
        f"#!/bin/sh\ncat >/dev/null\nwhile [ ! -e {gate} ]; do sleep 0.02; done\necho '{{}}'\n",
    )
    make_skill(
        "uses_api",
        f"#!/bin/sh\ncat >/dev/null\necho $API_TOKEN >> {ran}\necho '{{}}'\n",
        credentials=[SLOT],
    )
    settings = make_settings(tmp_path, skills_root, max_concurrent_executions=1)
    with running_app(settings) as server:
        for name, value in (("first", "first-value-1"), ("second", "second-value-2")):
            made = server.call(
                "POST", "/v1/credentials", "admin", json={"name": name, "values": {"token": value}}
            )
            assert made.status_code == 201, made.text
        bind = {"slot": "api", "skill": "uses_api"}
        assert (
            server.call("POST", "/v1/credentials/first/bind", "admin", json=bind).status_code == 200
        )
        blocking = server.call(
            "POST", "/v1/skills/blocker/execute", "olga", json={"args": {}, "wait": False}
        )
        queued = server.call(
            "POST", "/v1/skills/uses_api/execute", "olga", json={"args": {}, "wait": False}
        )
        assert queued.status_code in (200, 202), queued.text
        execution_id = queued.json()["id"]
        assert (
            server.call("POST", "/v1/credentials/second/bind", "admin", json=bind).status_code
            == 200
        )
        gate.touch()

        def final() -> dict[str, object] | None:
            body = server.call("GET", f"/v1/executions/{execution_id}", "olga").json()
            return body if body["status"] not in ("running", "queued") else None

        body = wait_for(final, "the queued call to end")
        assert blocking.status_code in (200, 202)
    assert body["status"] == "failed"
    assert body["error"]["code"] == "credentials_changed"
    assert not ran.exists()
