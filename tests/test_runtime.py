"""Start-up and ownership of a data dir: approvals survive restarts, calls cut short by a dead
manager become interrupted, and one manager owns an embedded data dir (a second one beside it
never disturbs its calls).

The restart tests run real ``ongrid-skills serve`` processes on one data dir; the start-up
recovery corner cases run the app in-process, with the store edited to the state a crash leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.execution.records import Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.runtime import open_manager
from ongrid_skills.settings import Settings
from ongrid_skills.store import open_store
from ongrid_skills.store.approvals import Signature
from ongrid_skills.types import Role
from tests.support.processes import alive, read_pid
from tests.support.server import ServeProcess, make_settings, running_app, start_serve, stop
from tests.support.skills import MakeSkill
from tests.support.waiting import wait_for

# Records each call it receives in calls.log and echoes its stdin as the result.
ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
printf '%s\\n' "$input"
"""
ARGS = {"service": "nginx", "restart": True, "note": "après ✓"}
# Blocks until a file named ``release`` appears in its folder; records its pid first.
HOLD = """#!/bin/sh
cat >/dev/null
echo $$ > main.tmp && mv main.tmp main.pid
echo "waiting for release" >&2
while [ ! -e release ]; do sleep 0.05; done
echo '{"released": true}'
"""
FINAL_NOT = ("pending_approval", "running")


@contextmanager
def released(folder: Path) -> Iterator[None]:
    """Whatever happens, let a HOLD skill go, and kill its group if it is still there."""
    try:
        yield
    finally:
        (folder / "release").touch()
        pid = read_pid(folder / "main.pid")
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def create_tokens(data_dir: Path, **roles: Role) -> dict[str, str]:
    store = open_store(str(data_dir))
    try:
        return {name: store.tokens.create(name, role)[0] for name, role in roles.items()}
    finally:
        store.close()


class Api:
    """httpx against a real `serve` process, one token per principal."""

    def __init__(self, serve: ServeProcess, tokens: dict[str, str]) -> None:
        self.serve = serve
        self.tokens = tokens

    def call(self, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.serve.url + path, headers=headers, timeout=30, **kw)

    def execution(self, execution_id: str) -> dict[str, Any]:
        response = self.call("GET", f"/v1/executions/{execution_id}", "olga")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def finished(self, execution_id: str) -> dict[str, Any]:
        def final() -> dict[str, Any] | None:
            body = self.execution(execution_id)
            return None if body["status"] in FINAL_NOT else body

        return wait_for(final, f"execution {execution_id} to finish")


@contextmanager
def serving(data_dir: Path, skills_root: Path, tokens: dict[str, str]) -> Iterator[Api]:
    serve = start_serve(data_dir, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    try:
        yield Api(serve, tokens)
    finally:
        stop(serve)


def test_a_pending_approval_survives_a_restart_and_approving_it_then_runs_the_call(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("restart_service", ECHO, **{"class": "mutating"})
    data_dir = tmp_path / "data"
    tokens = create_tokens(data_dir, olga=Role.OPERATOR, oscar=Role.OPERATOR)

    with serving(data_dir, skills_root, tokens) as api:
        asked = api.call("POST", "/v1/skills/restart_service/execute", "olga", json={"args": ARGS})
        assert asked.status_code == 202, asked.text
        first = api.serve
    # a graceful stop on SIGTERM ends with status 0
    assert first.proc.returncode == 0
    pending = asked.json()

    with serving(data_dir, skills_root, tokens) as api:
        inbox = api.call("GET", "/v1/approvals?status=pending", "oscar").json()["items"]
        assert [a["id"] for a in inbox] == [pending["approval_id"]]
        assert inbox[0]["args"] == ARGS
        assert api.execution(pending["id"])["status"] == "pending_approval"

        decided = api.call("POST", f"/v1/approvals/{pending['approval_id']}/approve", "oscar")

        assert decided.status_code == 200, decided.text
        assert decided.json()["status"] == "approved"
        done = api.finished(pending["id"])
        assert done["status"] == "succeeded"
        assert done["result"] == ARGS
        assert done["requested_by"] == "olga"
        # the skill got exactly the frozen args on stdin, in compact UTF-8 JSON
        sent = json.dumps(ARGS, separators=(",", ":"), ensure_ascii=False)
        assert (folder / "calls.log").read_text(encoding="utf-8") == sent + "\n"
        verified = api.call("GET", "/v1/audit/verify", "olga").json()
        assert verified["ok"], verified


def test_a_call_running_when_the_server_is_killed_is_interrupted_after_restart(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    hold = make_skill("hold_lock", HOLD, timeout_seconds=120)
    make_skill("restart_service", ECHO, **{"class": "mutating"})
    data_dir = tmp_path / "data"
    tokens = create_tokens(data_dir, olga=Role.OPERATOR, oscar=Role.OPERATOR)

    with released(hold):
        with serving(data_dir, skills_root, tokens) as api:
            pending = api.call(
                "POST", "/v1/skills/restart_service/execute", "olga", json={"args": ARGS}
            ).json()
            running = api.call("POST", "/v1/skills/hold_lock/execute", "olga", json={"wait": False})
            assert running.status_code == 202, running.text
            assert running.json()["status"] == "running"
            wait_for(lambda: read_pid(hold / "main.pid"), "the skill to start")
            stop(api.serve, signal.SIGKILL)
        call_id = running.json()["id"]

        store = open_store(str(data_dir))  # the row was written before the spawn
        try:
            row = store.executions.get(call_id)
            assert row is not None
            assert row.status.value == "running"
        finally:
            store.close()

        with serving(data_dir, skills_root, tokens) as api:
            after = api.execution(call_id)
            assert after["status"] == "interrupted"
            assert after["error"]["code"] == "interrupted"
            assert after["finished_at"] is not None
            approval = api.call("GET", f"/v1/approvals/{pending['approval_id']}", "olga").json()
            assert approval["status"] == "pending"
            assert api.execution(pending["id"])["status"] == "pending_approval"
            audit = api.call(
                "GET", "/v1/audit", "olga", params={"action": "execution.interrupted"}
            ).json()["items"]
            assert [(e["subject"], e["actor"]) for e in audit] == [(call_id, "manager")]
            assert api.call("GET", "/v1/audit/verify", "olga").json()["ok"]


# ---- in-process start-up recovery -----------------------------------------------------------
@contextmanager
def restarted(settings: Settings) -> Iterator[tuple[TestClient, Any]]:
    """The app again on the same data dir (tokens are kept in the store)."""
    store = open_store(settings.data_dir)
    app = create_app(settings, store=store, loader_sink=lambda _line: None)
    try:
        with TestClient(app) as client:
            yield client, store
    finally:
        store.close()


def pending_request(
    tmp_path: Path, skills_root: Path, skill: str = "set_flag"
) -> tuple[Settings, dict[str, Any]]:
    settings = make_settings(tmp_path, skills_root)
    with running_app(settings) as server:
        asked = server.call("POST", f"/v1/skills/{skill}/execute", "olga", json={"args": ARGS})
        assert asked.status_code == 202, asked.text
    body: dict[str, Any] = asked.json()
    return settings, body


def crash_after_approval(settings: Settings, approval_id: str) -> None:
    """The state a manager leaves when it dies between the last signature and the spawn."""
    store = open_store(settings.data_dir)
    try:
        now = time.time()
        with store.tx() as conn:
            store.approvals.add_signature(
                conn, approval_id, Signature("oscar", "operator", "approve", now)
            )
            assert store.approvals.claim(
                conn, approval_id, expected="pending", status="approved", decided_at=now
            )
            store.audit.append(conn, "manager", "approval.approved", approval_id, {})
    finally:
        store.close()


def final(store: Any, execution_id: str) -> Any:
    def done() -> Any:
        found = store.executions.get(execution_id)
        return found if found is not None and found.status.final else None

    return wait_for(done, f"execution {execution_id} to finish")


def test_an_approved_call_that_never_started_runs_at_start_up(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("set_flag", ECHO, **{"class": "mutating"})
    settings, pending = pending_request(tmp_path, skills_root)
    crash_after_approval(settings, pending["approval_id"])

    with restarted(settings) as (_client, store):
        done = final(store, pending["id"])

    assert done.status.value == "succeeded"
    assert done.result == ARGS
    assert [json.loads(line) for line in (folder / "calls.log").read_text().splitlines()] == [ARGS]


def test_an_approved_call_whose_skill_changed_while_down_is_void_at_start_up(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    folder = make_skill("set_flag", ECHO, **{"class": "mutating"})
    settings, pending = pending_request(tmp_path, skills_root)
    crash_after_approval(settings, pending["approval_id"])
    manifest = json.loads((folder / "skill.json").read_text())
    (folder / "skill.json").write_text(json.dumps({**manifest, "timeout_seconds": 3}))

    with restarted(settings) as (_client, store):
        execution = store.executions.get(pending["id"])
        approval = store.approvals.get(pending["approval_id"])
        voided = store.audit.entries(action="approval.void")
        assert store.audit.verify().ok

    assert execution.status.value == "rejected"
    assert execution.error.code == "skill_changed"
    assert approval.status == "void"
    assert [e["subject"] for e in voided] == [pending["approval_id"]]
    assert not (folder / "calls.log").exists()


def test_a_request_whose_deadline_passed_while_down_is_expired_at_start_up(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    settings, pending = pending_request(tmp_path, skills_root)
    conn = sqlite3.connect(Path(settings.data_dir) / "ongrid.db")
    try:
        with conn:
            conn.execute(
                "UPDATE approvals SET expires_at = ? WHERE id = ?",
                (time.time() - 1, pending["approval_id"]),
            )
    finally:
        conn.close()

    with restarted(settings) as (_client, store):
        approval = store.approvals.get(pending["approval_id"])
        execution = store.executions.get(pending["id"])
        expired = store.audit.entries(action="approval.expired")

    assert approval.status == "expired"
    assert execution.status.value == "expired"
    assert [e["subject"] for e in expired] == [pending["approval_id"]]


def test_a_graceful_stop_interrupts_running_calls_and_kills_them(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    hold = make_skill("hold_lock", HOLD, timeout_seconds=120)
    settings = make_settings(tmp_path, skills_root)
    with released(hold):
        with running_app(settings) as server:
            running = server.call(
                "POST", "/v1/skills/hold_lock/execute", "olga", json={"wait": False}
            )
            assert running.status_code == 202, running.text
            pid = wait_for(lambda: read_pid(hold / "main.pid"), "the skill to start")
        # the app has shut down: the call was cut short, not left running
        store = open_store(settings.data_dir)
        try:
            execution = store.executions.get(running.json()["id"])
        finally:
            store.close()

        assert execution is not None
        assert execution.status.value == "interrupted"
        assert execution.error is not None
        assert execution.error.code == "interrupted"
        wait_for(lambda: not alive(pid), "the skill process to be killed", timeout=5)


def test_a_pending_request_stays_pending_over_repeated_restarts(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    settings, pending = pending_request(tmp_path, skills_root)
    for _ in range(2):
        with restarted(settings) as (client, store):
            assert client.get("/v1/health").status_code == 200
            approval = store.approvals.get(pending["approval_id"])
            assert approval.status == "pending"
            assert store.executions.get(pending["id"]).status.value == "pending_approval"


# ---- one manager owns an embedded data dir ---------------------------------------------------
WAITS = "#!/bin/sh\ncat >/dev/null\nwhile [ ! -e {gate} ]; do sleep 0.01; done\necho '{{}}'\n"


def test_a_second_manager_on_the_same_data_dir_leaves_running_calls_alone(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    make_skill("slow", WAITS.format(gate=gate), env_allow=["PATH"])
    settings = make_settings(tmp_path, skills_root)
    who = Principal("olga", Role.OPERATOR)

    async def scenario() -> tuple[bool, bool, Status, Status]:
        async with open_manager(settings, loader_sink=lambda _l: None) as first:
            execution = await first.submit("slow", {}, principal=who, wait=False)
            async with open_manager(settings, loader_sink=lambda _l: None) as second:
                seen_by_second = second.get(execution.id).status
                second_owns = second.owns_data_dir
            timeline = first.hub.get(execution.id)
            assert timeline is not None, "the call is no longer running"
            gate.touch()
            async with asyncio.timeout(20):  # the timeline ends once the outcome is stored
                async for _ in timeline.follow():
                    pass
            return first.owns_data_dir, second_owns, seen_by_second, first.get(execution.id).status

    first_owns, second_owns, seen, final = asyncio.run(scenario())
    assert (first_owns, second_owns) == (True, False)
    assert seen is Status.RUNNING  # not turned into "interrupted" by the second manager
    assert final is Status.SUCCEEDED


def test_the_data_dir_is_free_again_once_its_manager_closed(
    skills_root: Path, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, skills_root)

    async def twice() -> list[bool]:
        owned = []
        for _ in range(2):
            async with open_manager(settings, loader_sink=lambda _l: None) as manager:
                owned.append(manager.owns_data_dir)
        return owned

    assert asyncio.run(twice()) == [True, True]
