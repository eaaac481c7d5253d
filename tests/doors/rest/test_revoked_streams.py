"""A revoked token ends every stream it holds open, on a real ``serve``: the approval inbox, an
execution's events, an agent run's events and an MCP session (its GET stream, its next request);
and on replicas sharing a PostgreSQL database, on every replica.

Each token is revoked as an operator revokes it, by ``ongrid-skills token revoke`` in a process
of its own on the server's data dir (or in the shared database), so the server is never told:
it must notice."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ongrid_skills.doors.stream_guard import RECHECK_SECONDS, TICK_SECONDS
from ongrid_skills.types import Role
from tests.support.agent import llm_env
from tests.support.cli import run_cli
from tests.support.llm import FakeLLM, Reply, call
from tests.support.replicas import ReplicaSet
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_persona, write_skill
from tests.support.sse import Sse, StreamWatch
from tests.support.waiting import wait_for

#: How long after a revocation a stream may go on (the bound the docs give) …
BOUND = RECHECK_SECONDS + TICK_SECONDS
#: … and what a loaded test machine adds to it.
SLACK = 3.0

#: Writes a stderr line every 50 ms until the file named by its ``gate`` argument exists.
CHATTY = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
n=0
while [ ! -e "$gate" ]; do n=$((n + 1)); echo "line $n" >&2; /bin/sleep 0.05; done
echo '{"done": true}'
"""
GATE_SCHEMA = {"type": "object", "properties": {"gate": {"type": "string"}}, "required": ["gate"]}


def write_skills(root: Path) -> None:
    write_skill(root, "disk_clean", **{"class": "mutating"})
    write_skill(root, "chatty", CHATTY, schema=GATE_SCHEMA, timeout_seconds=60)


@dataclass
class World:
    served: Served
    fake: FakeLLM

    def new_token(self, name: str, role: str = "viewer") -> str:
        made = run_cli(
            "token", "create", "--role", role, "--name", name, ONGRID_DATA_DIR=self.data_dir
        )
        assert made.returncode == 0, made.stderr
        return made.stdout.strip()

    def revoke(self, name: str) -> float:
        """Revoke ``name``'s token from another process; when it was done (monotonic)."""
        revoked = run_cli("token", "revoke", name, ONGRID_DATA_DIR=self.data_dir)
        assert revoked.returncode == 0, revoked.stderr
        return time.monotonic()

    @property
    def data_dir(self) -> str:
        return str(self.served.process.data_dir)

    def client(self, token: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.served.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(10.0, read=60.0),
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("revoked")
    write_persona(base / "personas", "fixer", "mutating-with-confirm")
    with FakeLLM() as fake:
        served = serve_for_cli(
            base, write_skills, ONGRID_PERSONAS_DIRS=str(base / "personas"), **llm_env(fake)
        )
        try:
            yield World(served, fake)
        finally:
            stop(served.process)


def assert_ended_for_the_revocation(watch: StreamWatch, revoked_at: float) -> Sse:
    """The stream closed within the bound, its last event saying why, and nothing with data
    came later than the bound after the revocation; the last event is returned."""
    assert watch.closed.wait(BOUND + SLACK), (
        f"the stream was still open {BOUND + SLACK} s after the revocation: {watch.kinds()[-5:]}"
    )
    assert watch.failure is None, watch.failure
    assert watch.closed_at is not None and watch.closed_at - revoked_at <= BOUND + SLACK
    last = watch.events[-1][1]
    assert last.event == "error", watch.kinds()[-5:]
    assert last.json()["error"]["code"] == "unauthorized"
    assert "revoked" in last.json()["error"]["message"]
    late = watch.after(revoked_at + BOUND + SLACK)
    assert late in ([], [last]), [e.event for e in late]
    return last


def test_a_revoked_token_ends_its_approval_inbox_stream(world: World) -> None:
    token = world.new_token("rita-inbox")
    with world.client(token) as client:
        watch = StreamWatch(client, "/v1/approvals/events")
        watch.start()
        watch.wait_event("ready")
        revoked_at = world.revoke("rita-inbox")
        # New requests (with their frozen args) keep coming while the server has not noticed.
        asked: list[str] = []
        while not watch.closed.wait(0.2) and time.monotonic() - revoked_at < BOUND + SLACK:
            answer = world.served.execute("disk_clean")
            asked.append(answer["approval_id"])
        assert_ended_for_the_revocation(watch, revoked_at)
        refused = client.get("/v1/approvals")
    assert refused.status_code == 401
    # A request made once the stream had ended never reached it.
    after = world.served.execute("disk_clean")["approval_id"]
    seen = {e.json().get("id") for _, e in watch.events if e.event == "requested"}
    assert after not in seen
    for approval_id in [*asked, after]:
        world.served.http("POST", f"/v1/approvals/{approval_id}/reject", "admin", json={})


def test_a_revoked_token_ends_its_stream_of_an_executions_stderr(
    world: World, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    execution = world.served.execute("chatty", args={"gate": str(gate)}, wait=False)
    token = world.new_token("rita-logs")
    try:
        with world.client(token) as client:
            watch = StreamWatch(client, f"/v1/executions/{execution['id']}/events")
            watch.start()
            watch.wait_event("stderr")
            revoked_at = world.revoke("rita-logs")
            assert_ended_for_the_revocation(watch, revoked_at)
            assert "end" not in watch.kinds()  # the call goes on; its stream did not
            refused = client.get(f"/v1/executions/{execution['id']}")
        assert refused.status_code == 401
    finally:
        gate.touch()
    assert world.served.final(execution["id"])["status"] == "succeeded"


def test_a_revoked_token_ends_its_stream_of_an_agent_run(world: World) -> None:
    world.fake.add(Reply("Cleaning.", [call("disk_clean", {"path": "/tmp"})]), Reply("Done."))
    started = world.served.http(
        "POST", "/v1/agent/runs", "olga", json={"persona": "fixer", "message": "clean /tmp"}
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    token = world.new_token("rita-agent")
    with world.client(token) as client:
        watch = StreamWatch(client, f"/v1/agent/runs/{run_id}/events")
        watch.start()
        pause = watch.wait_event("approval_pending")
        revoked_at = world.revoke("rita-agent")
        assert_ended_for_the_revocation(watch, revoked_at)
        assert "done" not in watch.kinds()
    approval_id = pause.json()["approval_id"]
    world.served.http("POST", f"/v1/approvals/{approval_id}/reject", "admin", json={})

    def finished() -> bool:
        body = world.served.http("GET", f"/v1/agent/runs/{run_id}").json()
        return body["status"] != "waiting_approval" and body["status"] != "running"

    wait_for(finished, "the agent run to end")


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def test_a_revoked_token_ends_its_mcp_session_and_its_open_stream(world: World) -> None:
    token = world.new_token("rita-mcp")
    with world.client(token) as client:
        opened = client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert opened.status_code == 200, opened.text
        session = {
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        answered = client.post("/mcp", json=initialized, headers={**MCP_HEADERS, **session})
        assert answered.status_code == 202, answered.text
        watch = StreamWatch(client, "/mcp", headers={"Accept": "text/event-stream", **session})
        watch.start()
        assert watch.opened.wait(15) and watch.status == 200
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        before = client.post("/mcp", json=listing, headers={**MCP_HEADERS, **session})
        assert before.status_code == 200, before.text
        revoked_at = world.revoke("rita-mcp")
        assert_ended_for_the_revocation(watch, revoked_at)
        after = client.post("/mcp", json=listing, headers={**MCP_HEADERS, **session})
    assert after.status_code == 401
    assert json.loads(after.text)["error"]["code"] == "unauthorized"


def test_a_token_revoked_on_a_shared_database_ends_its_streams_on_every_replica(
    replicas: ReplicaSet,
) -> None:
    """Replicas on one PostgreSQL database: the token is revoked in the database (as
    ``token revoke`` or another replica does it), and both replicas' streams end."""
    alpha, beta = replicas.start_all("alpha", "beta")
    with replicas.store() as store:
        token, info = store.tokens.create("rita-replicas", Role.VIEWER)
    watches = []
    for replica in (alpha, beta):
        client = httpx.Client(
            base_url=replica.serve.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(10.0, read=60.0),
        )
        watch = StreamWatch(client, "/v1/approvals/events")
        watch.start()
        watch.wait_event("ready")
        watches.append((client, watch))
    with replicas.store() as store:
        assert store.tokens.revoke(info.id)
    revoked_at = time.monotonic()
    try:
        for client, watch in watches:
            assert_ended_for_the_revocation(watch, revoked_at)
            assert client.get("/v1/approvals").status_code == 401
    finally:
        for client, _watch in watches:
            client.close()
