"""Edge workers use their own credentials (SPEC §18): bound with ``ongrid-skills credentials``
against the worker's data dir, injected and masked on the host; the manager never holds or
sends a value, the signed call and the audit carry the names only. Black box: a real
``serve``, a real NATS server, a real worker process."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.cli import run_cli
from tests.support.fleet import Fleet, Spy, host_skill
from tests.support.leaks import files_holding
from tests.support.server import start_serve, stop
from tests.support.waiting import wait_for

SECRET = "host-only-secret-7c1f2e"
SLOT = {"slot": "db", "fields": ["password"], "inject": {"env": {"DB_PASSWORD": "{{password}}"}}}
BODY = 'echo "using $DB_PASSWORD" >&2\necho "{\\"password\\": \\"$DB_PASSWORD\\"}"'


def worker_cli(data: Path, skills: Path, *args: str, stdin: str | None = None) -> None:
    env = {"ONGRID_DATA_DIR": str(data), "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)}
    done = run_cli("--data-dir", str(data), *args, stdin=stdin, **env)
    assert done.returncode == 0, done.stderr


def test_a_worker_gives_its_own_credential_masks_it_and_the_manager_sees_names_only(
    fleet: Fleet, tmp_path: Path
) -> None:
    skills = tmp_path / "worker-skills"
    host_skill(skills, "db_check", BODY, credentials=[SLOT])
    data = tmp_path / "worker-alpha"
    data.mkdir()
    worker_cli(data, skills, "credentials", "create", "db-alpha", "--value", "password",
               stdin=SECRET)  # fmt: skip
    worker_cli(data, skills, "credentials", "bind", "db-alpha", "--skill", "db_check",
               "--slot", "db")  # fmt: skip

    manager_data = Path(fleet.settings.data_dir)
    store = open_store(str(manager_data))
    token, _ = store.tokens.create("olga", Role.OPERATOR)
    store.close()
    (tmp_path / "manager-skills").mkdir()
    spy = Spy(fleet.nats.url, ">")  # every message of the server, the bucket's too
    served = start_serve(manager_data, fleet.manager_env(tmp_path / "manager-skills"))
    headers = {"Authorization": f"Bearer {token}"}
    try:
        fleet.worker("alpha", skills)

        def offered() -> dict[str, object] | None:
            answer = httpx.get(f"{served.url}/v1/skills/db_check", headers=headers, timeout=10)
            return answer.json() if answer.status_code == 200 else None

        wait_for(offered, "db_check to be offered on alpha")
        answer = httpx.post(
            f"{served.url}/v1/skills/db_check/execute",
            headers=headers,
            json={"args": {"host": "alpha"}},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        execution = answer.json()
        assert execution["status"] == "succeeded", execution
        assert execution["result"] == {"password": "***"}
        events = httpx.get(
            f"{served.url}/v1/executions/{execution['id']}/events", headers=headers, timeout=30
        ).text
        assert "using ***" in events
        audit = open_store(str(manager_data))
        try:
            started = [e for e in audit.audit.entries(action="execution.started")]
        finally:
            audit.close()
        assert started[0]["data"]["credentials"] == {"db": "db-alpha"}
    finally:
        stop(served)
        spy.close()
    assert SECRET not in json.dumps(execution) + events
    assert files_holding(manager_data, SECRET) == []
    bus = b"".join(data for data, _headers in spy.messages)
    assert b"db-alpha" in bus  # the names travel, in the signed call and the inventory
    assert SECRET.encode() not in bus
