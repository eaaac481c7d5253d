"""The agent's REST doors on a real app and store: runs, approvals in a run, SSE events."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.settings import Settings
from tests.support.agent import agent_settings, envelope
from tests.support.llm import FakeLLM, Reply, call
from tests.support.server import Server
from tests.support.skills import MakeSkill, write_persona
from tests.support.waiting import wait_for

ECHO = """#!/bin/sh
input=$(cat)
printf '%s\\n' "$input" >> calls.log
echo "applying change" >&2
printf '%s\\n' "$input"
"""


@pytest.fixture
def server_skills(tmp_path: Path, make_skill: MakeSkill) -> None:
    make_skill("check_disk")
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")


@pytest.fixture
def server_settings(
    tmp_path: Path, skills_root: Path, server_skills: None, fake: FakeLLM
) -> Settings:
    return agent_settings(tmp_path, skills_root, fake)


def run_of(server: Server, run_id: str, who: str = "vera") -> dict[str, Any]:
    response = server.call("GET", f"/v1/agent/runs/{run_id}", who)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def start(server: Server, who: str = "olga", **body: Any) -> str:
    response = server.call("POST", "/v1/agent/runs", who, json=body)
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "running"
    run_id: str = response.json()["id"]
    return run_id


class EventReader(threading.Thread):
    """Follows ``GET /v1/agent/runs/{id}/events`` until the stream ends."""

    def __init__(self, server: Server, run_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.run_id = server, run_id
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.ids: list[int] = []

    def run(self) -> None:
        path = f"/v1/agent/runs/{self.run_id}/events"
        with self.server.client.stream("GET", path, headers=self.server.as_("vera")) as response:
            assert response.status_code == 200
            kind = "message"
            for line in response.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("id:"):
                    self.ids.append(int(line[3:].strip()))
                elif line.startswith("data:"):
                    self.events.append((kind, json.loads(line[5:].strip())))

    def types(self) -> list[str]:
        return [kind for kind, _ in self.events]


def test_a_mutating_call_pauses_the_run_until_another_operator_approves_over_rest(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply("I will set it.", [call("set_flag", {"flag": "maintenance"})]), Reply("Done."))
    run_id = start(server, persona="fixer", message="put db-01 in maintenance")
    reader = EventReader(server, run_id)
    reader.start()
    wait_for(lambda: run_of(server, run_id)["status"] == "waiting_approval", "the run to pause")
    pending = server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"]
    (approval,) = pending
    assert approval["skill"] == "set_flag"
    assert approval["args"] == {"flag": "maintenance"}
    assert approval["requested_by"] == f"agent:{run_id}"
    assert not (skills_root / "set-flag" / "calls.log").exists()  # nothing ran yet
    assert len(fake.requests) == 1  # the model is not asked again while the run waits
    # The agent can never sign; another operator does.
    approved = server.call("POST", f"/v1/approvals/{approval['id']}/approve", "oscar")
    assert approved.status_code == 200, approved.text
    final = wait_for(
        lambda: (b := run_of(server, run_id))["status"] == "done" and b, "the run to resume"
    )
    reader.join(timeout=15)
    assert final["final_answer"] == "Done."
    assert fake.results_by_tool(1) == {"set_flag": '{"flag":"maintenance"}'}
    assert (skills_root / "set-flag" / "calls.log").read_text() == '{"flag":"maintenance"}\n'
    types = reader.types()
    assert types[0] == "message" and types[-1] == "done"
    for kind in ("tool_start", "approval_pending", "stderr", "tool_end"):
        assert kind in types, types
    assert types.index("approval_pending") < types.index("stderr") < types.index("tool_end")
    pause = dict(reader.events)["approval_pending"]
    assert pause["approval_id"] == approval["id"] and pause["tool"] == "set_flag"
    assert [m["role"] for m in final["messages"]] == [
        "user",
        "assistant",
        "pending",
        "tool",
        "assistant",
    ]
    # The same timeline, replayed from the store once the run is over.
    replay = EventReader(server, run_id)
    replay.run()
    assert replay.types() == types


def test_a_rejected_call_is_reported_to_the_model_and_the_run_goes_on(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply(calls=[call("set_flag", {"flag": "x"})]), Reply("It was rejected."))
    run_id = start(server, persona="fixer", message="set x")
    wait_for(lambda: run_of(server, run_id)["status"] == "waiting_approval", "the run to pause")
    (approval,) = server.call("GET", "/v1/approvals?status=pending", "vera").json()["items"]
    body = {"comment": "change freeze"}
    rejected = server.call("POST", f"/v1/approvals/{approval['id']}/reject", "oscar", json=body)
    assert rejected.status_code == 200
    final = wait_for(lambda: (b := run_of(server, run_id))["status"] == "done" and b, "the end")
    assert final["final_answer"] == "It was rejected."
    got = envelope(fake.results_by_tool(1)["set_flag"])
    assert got["error"] == {"code": "rejected", "message": "change freeze"}
    assert not (skills_root / "set-flag" / "calls.log").exists()


def test_wait_true_answers_with_the_finished_run_and_its_transcript(
    server: Server, fake: FakeLLM
) -> None:
    fake.add(Reply(calls=[call("check_disk")]), Reply("All good."))
    response = server.call(
        "POST", "/v1/agent/runs", "vera", json={"message": "check the disk", "wait": True}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "done" and body["final_answer"] == "All good."
    assert body["persona"] == "default" and body["requested_by"] == "vera"
    assert body["role"] == "viewer" and body["model"] == "test-model" and body["turns"] == 2
    tool = next(m for m in body["messages"] if m["role"] == "tool")
    assert tool["content"] == '{"ok": true}' and tool["name"] == "check_disk"
    listed = server.call("GET", "/v1/agent/runs", "vera").json()
    assert [r["id"] for r in listed["items"]] == [body["id"]]


def test_a_viewers_run_cannot_reach_mutating_skills_whatever_the_persona(
    server: Server, fake: FakeLLM, skills_root: Path
) -> None:
    fake.add(Reply(calls=[call("set_flag", {"flag": "x"})]), Reply("not allowed"))
    body = {"persona": "fixer", "message": "set x", "wait": True}
    response = server.call("POST", "/v1/agent/runs", "vera", json=body)
    assert response.status_code == 200
    assert fake.tool_names(0) == ["check_disk"]
    assert envelope(fake.results_by_tool(1)["set_flag"])["error"]["code"] == "not_offered"
    assert not (skills_root / "set-flag" / "calls.log").exists()


def test_cancelling_a_waiting_run_withdraws_its_approval_request(
    server: Server, fake: FakeLLM
) -> None:
    fake.add(Reply(calls=[call("set_flag", {"flag": "x"})]))
    run_id = start(server, persona="fixer", message="set x")
    wait_for(lambda: run_of(server, run_id)["status"] == "waiting_approval", "the run to pause")
    cancelled = server.call("POST", f"/v1/agent/runs/{run_id}/cancel", "olga")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    approvals = server.call("GET", "/v1/approvals", "vera").json()["items"]
    assert [a["status"] for a in approvals] == ["cancelled"]
    assert server.call("POST", f"/v1/agent/runs/{run_id}/cancel", "vera").status_code == 403
    assert server.call("POST", f"/v1/agent/runs/{run_id}/cancel", "olga").status_code == 409
    events = server.call("GET", f"/v1/agent/runs/{run_id}/events", "vera").text
    kinds = [line[6:].strip() for line in events.splitlines() if line.startswith("event:")]
    assert "approval_pending" in kinds and kinds[-1] == "done"


def test_bad_requests_get_the_usual_errors(server: Server, fake: FakeLLM) -> None:
    no_token = server.client.post("/v1/agent/runs", json={"message": "hi"})
    assert no_token.status_code == 401
    unknown = server.call("POST", "/v1/agent/runs", json={"persona": "ghost", "message": "hi"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    extra = server.call("POST", "/v1/agent/runs", json={"message": "hi", "temperature": 2})
    assert extra.status_code == 400
    blank = server.call("POST", "/v1/agent/runs", json={"message": "   "})
    assert blank.status_code == 400
    assert server.call("GET", "/v1/agent/runs/nope").status_code == 404
    assert server.call("GET", "/v1/agent/runs/nope/events").status_code == 404
    assert fake.requests == []


def test_text_deltas_reach_sse_clients_and_two_clients_at_once_get_the_same_stream(
    server: Server, fake: FakeLLM
) -> None:
    fake.add(
        Reply("Let me check the disk.", [call("check_disk")], delay=0.5),
        Reply("The disk is fine.", delay=0.5),
    )
    run_id = start(server, message="how is the disk?")
    readers = [EventReader(server, run_id), EventReader(server, run_id)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=30)
    first, second = (reader.events for reader in readers)
    assert first == second
    kinds = [kind for kind, _ in first]
    deltas = [data["text"] for kind, data in first if kind == "text_delta"]
    assert "".join(deltas) == "Let me check the disk.The disk is fine."
    assert len(deltas) > 2  # streamed in pieces, not whole
    # The pieces of an answer come before its whole ``message``, numbered like every event.
    said = [i for i, (kind, data) in enumerate(first) if data.get("role") == "assistant"]
    assert kinds.index("text_delta") < said[0] and kinds[-1] == "done"
    assert all(set(data) == {"type", "ts", "text"} for kind, data in first if kind == "text_delta")
    assert readers[0].ids == readers[1].ids == list(range(1, len(first) + 1))
    replay = EventReader(server, run_id)
    replay.run()
    assert replay.events == first and replay.ids == readers[0].ids


def test_the_console_reaches_the_same_agent_service_as_the_rest_door(
    server: Server, fake: FakeLLM
) -> None:
    app: Any = server.client.app
    agents = app.state.agents
    assert app.state.console.state.agents is agents
    fake.add(Reply("hello"))
    run_id = start(server, message="hi")
    wait_for(lambda: run_of(server, run_id)["status"] == "done", "the run to end")
    assert agents.get(run_id).final_answer == "hello"
