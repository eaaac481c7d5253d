"""A built-in can never open the store's own files inside a running server.

The loss this guards against: ``tail_file`` opening and closing the server's SQLite file drops
the POSIX locks SQLite holds on it (they belong to the process, not to the descriptor); the next
CLI on the data dir then believes it is the last user, checkpoints and deletes the WAL, and every
later write of the server goes to an unlinked file. The readable roots here include the whole
data dir on purpose: the store's files must be refused whatever the operator allows.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.mcp import ServeProcess, start_serve, stop, venv_bin


@dataclass
class Live:
    process: ServeProcess
    base: Path
    data: Path
    tokens: dict[str, str]

    def run(self, who: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(
            f"{self.process.url}/v1/skills/{name}/execute",
            json={"args": args},
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        environ = {"PATH": os.environ["PATH"], "ONGRID_DATA_DIR": str(self.data)}
        return subprocess.run(
            [venv_bin("ongrid-skills"), *args],
            capture_output=True,
            text=True,
            env=environ,
            timeout=60,
            check=False,
        )


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    data = tmp_path / "data"
    store = open_store(str(data), None)
    tokens = {
        "vera": store.tokens.create("vera", Role.VIEWER)[0],
        "admin": store.tokens.create("admin", Role.ADMIN)[0],
    }
    store.close()
    (tmp_path / "app.log").write_text("one\ntwo\nthree\n")
    env = {"ONGRID_BUNDLED_SKILLS": "1", "ONGRID_BUILTIN_READ_PATHS": str(tmp_path)}
    process = start_serve(data, env)
    try:
        yield Live(process, tmp_path, data, tokens)
    finally:
        stop(process)


def test_tail_file_on_the_servers_own_database_is_refused_and_nothing_is_lost(
    live: Live,
) -> None:
    ids = [live.run("vera", "tail_file", {"path": str(live.base / "app.log")})["id"]]
    (live.base / "db-link").symlink_to(live.data / "ongrid.db")
    os.link(live.data / "ongrid.db", live.base / "db-hardlink")  # same file, another name
    refused = []
    for target in (
        live.data / "ongrid.db",
        live.data / "ongrid.db-wal",
        live.data / "ongrid.db-shm",
        live.base / "db-link",
        live.base / "db-hardlink",
        live.base / "data" / ".." / "data" / "ongrid.db",
    ):
        body = live.run("vera", "tail_file", {"path": str(target), "lines": 1})
        assert body["status"] == "failed", body
        assert body["error"]["code"] == "forbidden_path", body
        refused.append(body["id"])

    # A CLI on the same data dir while the server runs: it must see the server's locks.
    created = live.cli("token", "create", "--role", "viewer", "--name", "later")
    assert created.returncode == 0, created.stderr
    for _ in range(5):
        body = live.run("vera", "tail_file", {"path": str(live.base / "app.log"), "lines": 2})
        assert body["status"] == "succeeded", body
        assert body["result"]["lines"] == ["two", "three"]
        ids.append(body["id"])
    stop(live.process)

    store = open_store(str(live.data), None)
    try:
        for execution_id in [*ids, *refused]:
            assert store.executions.get(execution_id) is not None, execution_id
        finished = {
            e["subject"]: e["data"]
            for e in store.audit.entries(limit=1000, action="execution.finished")
        }
        for execution_id in refused:
            assert finished[execution_id]["error"] == "forbidden_path"
        for execution_id in ids:
            assert finished[execution_id]["status"] == "succeeded"
        assert "later" in {t.name for t in store.tokens.all()}
    finally:
        store.close()
    verify = live.cli("audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "intact" in verify.stderr
