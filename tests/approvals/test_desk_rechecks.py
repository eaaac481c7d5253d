"""The approval desk's hard rules, black-box: one signature claims a request once, even across
two managers on one store; a request that no longer passes the gate is void, never run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.store import open_store
from tests.support.server import (
    ROLES,
    Server,
    make_settings,
    running_app,
    start_serve,
    stop,
)
from tests.support.skills import MakeSkill

RACES = 8


def counting_script(log: Path) -> str:
    return f"#!/bin/sh\ncat >/dev/null\necho run >> {log}\necho '{{\"ok\": true}}'\n"


def write_persona(folder: Path, name: str, mode: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: The {name} persona.\nwhen_to_use: In tests.\n"
        f"permission_mode: {mode}\n---\nYou are {name}.\n"
    )


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def server(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, runs: Path
) -> Iterator[Server]:
    make_skill("count_runs", counting_script(runs), **{"class": "mutating"})
    write_persona(tmp_path / "personas", "pm", "mutating-with-confirm")
    with running_app(make_settings(tmp_path, skills_root)) as srv:
        yield srv


def request(server: Server, persona: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"args": {}}
    if persona:
        body["persona"] = persona
    response = server.call("POST", "/v1/skills/count_runs/execute", "olga", json=body)
    assert response.status_code == 202, response.text
    execution: dict[str, Any] = response.json()
    assert execution["status"] == "pending_approval"
    return execution


def test_a_request_whose_persona_was_reloaded_stricter_is_void_and_never_runs(
    server: Server, tmp_path: Path, runs: Path
) -> None:
    pending = request(server, persona="pm")
    write_persona(tmp_path / "personas", "pm", "read-only")
    assert server.call("POST", "/v1/reload").status_code == 200
    signed = server.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
    assert signed.status_code == 409
    assert "persona mode read-only does not permit mutating" in signed.json()["error"]["message"]
    approval = server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert approval["status"] == "void"
    ended = server.call("GET", f"/v1/executions/{pending['id']}").json()
    assert ended["status"] == "rejected"
    assert ended["error"]["code"] == "not_permitted"
    assert not runs.exists()


def test_a_request_whose_requester_token_was_revoked_is_void_and_never_runs(
    server: Server, runs: Path
) -> None:
    pending = request(server)
    assert server.store.tokens.revoke("olga", actor="admin")
    signed = server.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")
    assert signed.status_code == 409
    assert "token (olga) was revoked" in signed.json()["error"]["message"]
    assert server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()["status"] == "void"
    assert not runs.exists()


def test_two_managers_on_one_store_racing_the_last_signature_run_the_call_once(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, runs: Path
) -> None:
    make_skill("count_runs", counting_script(runs), **{"class": "mutating"})
    data = tmp_path / "data"
    store = open_store(str(data))
    tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    store.close()
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)}
    first, second = start_serve(data, env), start_serve(data, env)
    try:
        with httpx.Client(timeout=30) as http:

            def as_(who: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {tokens[who]}"}

            for _ in range(RACES):
                made = http.post(
                    f"{first.url}/v1/skills/count_runs/execute", json={}, headers=as_("olga")
                )
                assert made.status_code == 202, made.text
                approval_id = made.json()["approval_id"]
                barrier = threading.Barrier(2)
                codes: list[int] = []

                def sign(
                    url: str,
                    who: str,
                    approval: str = approval_id,
                    barrier: threading.Barrier = barrier,
                    codes: list[int] = codes,
                ) -> None:
                    barrier.wait(timeout=10)
                    path = f"{url}/v1/approvals/{approval}/approve"
                    codes.append(http.post(path, headers=as_(who)).status_code)

                threads = [
                    threading.Thread(target=sign, args=(first.url, "oscar")),
                    threading.Thread(target=sign, args=(second.url, "admin")),
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(timeout=30)
                assert sorted(codes) == [200, 409]
            executions = http.get(
                f"{first.url}/v1/executions",
                params={"skill": "count_runs", "limit": 100},
                headers=as_("admin"),
            ).json()["items"]
            assert len(executions) == RACES
            deadline_ok = _wait_all_final(http, first.url, as_("admin"), executions)
            assert deadline_ok
    finally:
        stop(first)
        stop(second)
    assert runs.read_text().count("run\n") == RACES


def _wait_all_final(
    http: httpx.Client, url: str, headers: dict[str, str], executions: list[dict[str, Any]]
) -> bool:
    """Whether every execution reached ``succeeded`` before the deadline (the calls run in the
    server processes: their state is read back over REST, with a short backoff)."""
    deadline = time.monotonic() + 30
    pending = {e["id"] for e in executions}
    delay = 0.02
    while pending and time.monotonic() < deadline:
        for ident in list(pending):
            status = http.get(f"{url}/v1/executions/{ident}", headers=headers).json()["status"]
            if status == "succeeded":
                pending.discard(ident)
            elif status not in ("running", "queued", "pending_approval"):
                return False
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    return not pending
