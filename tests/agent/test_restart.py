"""Runs survive a restart of `ongrid-skills serve`: a waiting run resumes, a busy one is
reported interrupted."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.agent import llm_env
from tests.support.llm import FakeLLM, Reply, call
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for

ECHO = (
    "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> calls.log\nprintf '%s\\n' \"$input\"\n"
)


class Serve:
    def __init__(self, tmp_path: Path, skills_root: Path, fake: FakeLLM) -> None:
        self.data = tmp_path / "data"
        store = open_store(str(self.data))
        self.tokens = {n: store.tokens.create(n, Role.OPERATOR)[0] for n in ("olga", "oscar")}
        store.close()
        self.env = {
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root),
            "ONGRID_PERSONAS_DIRS": str(tmp_path / "personas"),
            **llm_env(fake),
        }
        self.process: ServeProcess | None = None

    def start(self) -> None:
        self.process = start_serve(self.data, self.env)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.process is not None
        stop(self.process, sig)

    def call(self, method: str, path: str, who: str = "olga", **kw: Any) -> httpx.Response:
        assert self.process is not None
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.process.url + path, headers=headers, timeout=10, **kw)

    def run(self, run_id: str) -> dict[str, Any]:
        body: dict[str, Any] = self.call("GET", f"/v1/agent/runs/{run_id}").json()
        return body


@pytest.fixture
def serve(tmp_path: Path, skills_root: Path, fake: FakeLLM) -> Iterator[Serve]:
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    server = Serve(tmp_path, skills_root, fake)
    yield server
    if server.process is not None:
        stop(server.process, signal.SIGKILL)


def test_a_run_waiting_for_approval_survives_a_restart_and_resumes_when_approved(
    serve: Serve, fake: FakeLLM, make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    fake.add(Reply(calls=[call("set_flag", {"flag": "on"})]))
    serve.start()
    body = {"persona": "fixer", "message": "turn the flag on"}
    run_id = serve.call("POST", "/v1/agent/runs", json=body).json()["id"]
    wait_for(lambda: serve.run(run_id)["status"] == "waiting_approval", "the run to pause")
    serve.stop()
    fake.add(Reply("The flag is on."))
    serve.start()
    assert serve.run(run_id)["status"] == "waiting_approval"
    (approval,) = serve.call("GET", "/v1/approvals?status=pending").json()["items"]
    assert serve.call("POST", f"/v1/approvals/{approval['id']}/approve", "oscar").status_code == 200
    final = wait_for(lambda: (b := serve.run(run_id))["status"] == "done" and b, "the resumed run")
    assert final["final_answer"] == "The flag is on."
    assert fake.results_by_tool(1) == {"set_flag": '{"flag":"on"}'}
    assert (skills_root / "set-flag" / "calls.log").read_text() == '{"flag":"on"}\n'
    assert [m["role"] for m in final["messages"]] == [
        "user",
        "assistant",
        "pending",
        "tool",
        "assistant",
    ]


def test_a_run_cut_off_by_a_dead_manager_is_reported_interrupted(
    serve: Serve, fake: FakeLLM
) -> None:
    fake.add(Reply("too late", delay=20))  # the model is still thinking when the manager dies
    serve.start()
    run_id = serve.call("POST", "/v1/agent/runs", json={"message": "hello"}).json()["id"]
    fake.wait_requests(1)
    serve.stop(signal.SIGKILL)
    serve.start()
    final = serve.run(run_id)
    assert final["status"] == "interrupted"
    assert final["error"]["code"] == "interrupted"
    with httpx.stream(
        "GET",
        f"{serve.process.url}/v1/agent/runs/{run_id}/events",  # type: ignore[union-attr]
        headers={"Authorization": f"Bearer {serve.tokens['olga']}"},
        timeout=10,
    ) as response:
        kinds = [line[6:].strip() for line in response.iter_lines() if line.startswith("event:")]
    assert kinds[0] == "message" and kinds[-1] == "done"
