"""``GET /v1/approvals/events`` on a real ``serve``: the pending requests, ``ready``, then every
change of any request as it happens, each as ``GET /v1/approvals/{id}`` shows it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.doors.rest import approval_events
from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.server import ROLES, ServeProcess, make_settings, start_serve, stop
from tests.support.skills import write_skill
from tests.support.sockets import free_port
from tests.support.sse import Sse, read_sse
from tests.support.waiting import wait_for


@dataclass
class Live:
    process: ServeProcess
    tokens: dict[str, str]
    skills: Path

    def client(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.process.url,
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
            timeout=httpx.Timeout(20.0),
        )

    def execute(self, skill: str, who: str = "olga", **body: Any) -> dict[str, Any]:
        with self.client(who) as client:
            answer = client.post(f"/v1/skills/{skill}/execute", json={"args": {}, **body})
        assert answer.status_code in (200, 202), answer.text
        result: dict[str, Any] = answer.json()
        return result

    def decide(self, approval_id: str, decision: str, who: str) -> httpx.Response:
        with self.client(who) as client:
            return client.post(f"/v1/approvals/{approval_id}/{decision}", json={})

    def approval(self, approval_id: str) -> dict[str, Any]:
        with self.client("vera") as client:
            body: dict[str, Any] = client.get(f"/v1/approvals/{approval_id}").json()
        return body


def write_skills(root: Path) -> None:
    write_skill(root, "disk_clean", **{"class": "mutating"})
    write_skill(root, "reboot", **{"class": "dangerous"})
    write_skill(root, "changing", description="first version", **{"class": "mutating"})


def serve_with_tokens(base: Path, **env: str) -> Live:
    skills, data = base / "skills", base / "data"
    write_skills(skills)
    store = open_store(str(data), None)
    tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    store.close()
    process = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills), **env})
    return Live(process, tokens, skills)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    served = serve_with_tokens(tmp_path_factory.mktemp("inbox"))
    try:
        yield served
    finally:
        stop(served.process)


def until_ready(events: Iterator[Sse]) -> list[Sse]:
    """The events before ``ready`` (the pending requests); ``ready`` itself is checked."""
    before = []
    for event in events:
        if event.event == "ready":
            assert event.json() == {"pending": len(before)}
            return before
        before.append(event)
    raise AssertionError("the stream ended before ready")


def next_about(events: Iterator[Sse], approval_id: str) -> Sse:
    """The next event about one request (others' events skipped; the client's read timeout
    is the deadline)."""
    for event in events:
        if event.json().get("id") == approval_id:
            return event
    raise AssertionError(f"the stream ended before an event about {approval_id}")


def test_the_stream_opens_with_the_pending_requests_oldest_first_then_ready(live: Live) -> None:
    first = live.execute("disk_clean")
    second = live.execute("reboot")
    once = {"follow": "false"}
    with (
        live.client("vera") as client,  # a viewer may watch
        client.stream("GET", "/v1/approvals/events", params=once) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        events = list(read_sse(answer))
    assert events[-1].event == "ready"
    backlog = events[:-1]
    assert {e.event for e in backlog} == {"requested"}
    ids = [e.json()["id"] for e in backlog]
    assert ids.index(first["approval_id"]) < ids.index(second["approval_id"])
    for event in backlog:
        assert event.json() == live.approval(event.json()["id"])
        assert event.json()["status"] == "pending"
    for pending in (first, second):
        live.decide(pending["approval_id"], "reject", "admin")


def test_every_change_of_a_request_arrives_as_it_happens(live: Live) -> None:
    with live.client("vera") as client, client.stream("GET", "/v1/approvals/events") as answer:
        events = read_sse(answer)
        until_ready(events)

        mutating = live.execute("disk_clean")["approval_id"]
        requested = next_about(events, mutating)
        assert (requested.event, requested.json()["status"]) == ("requested", "pending")
        assert requested.json()["requested_by"] == "olga"
        assert live.decide(mutating, "approve", "oscar").status_code == 200
        approved = next_about(events, mutating)
        assert (approved.event, approved.json()["status"]) == ("approved", "approved")
        assert [s["principal"] for s in approved.json()["signatures"]] == ["oscar"]

        dangerous = live.execute("reboot")["approval_id"]
        assert next_about(events, dangerous).event == "requested"
        live.decide(dangerous, "approve", "admin")
        signed = next_about(events, dangerous)
        assert (signed.event, signed.json()["status"]) == ("signed", "pending")
        assert (signed.json()["signatures_collected"], signed.json()["signatures_required"]) == (
            1,
            2,
        )
        live.decide(dangerous, "approve", "admin2")
        assert next_about(events, dangerous).event == "approved"

        rejected = live.execute("disk_clean")["approval_id"]
        assert next_about(events, rejected).event == "requested"
        live.decide(rejected, "reject", "oscar")
        event = next_about(events, rejected)
        assert (event.event, event.json()["status"]) == ("rejected", "rejected")
        assert event.json() == live.approval(rejected)

        withdrawn = live.execute("disk_clean")
        assert next_about(events, withdrawn["approval_id"]).event == "requested"
        with live.client("olga") as olga:
            assert olga.post(f"/v1/executions/{withdrawn['id']}/cancel").status_code == 200
        event = next_about(events, withdrawn["approval_id"])
        assert (event.event, event.json()["status"]) == ("cancelled", "cancelled")


def test_a_request_voided_by_a_changed_skill_arrives_as_void(live: Live) -> None:
    pending = live.execute("changing")["approval_id"]
    entry = live.skills / "changing" / "run"
    entry.write_text(entry.read_text() + "# edited after the request\n")
    with live.client("vera") as client, client.stream("GET", "/v1/approvals/events") as answer:
        events = read_sse(answer)
        assert pending in [e.json()["id"] for e in until_ready(events)]
        assert live.decide(pending, "approve", "oscar").status_code == 409
        event = next_about(events, pending)
    assert (event.event, event.json()["status"]) == ("void", "void")
    assert "changed" in event.json()["reason"]


def test_an_expired_request_arrives_as_expired(tmp_path: Path) -> None:
    served = serve_with_tokens(tmp_path, ONGRID_APPROVAL_TTL_SECONDS="1")
    try:
        with (
            served.client("vera") as client,
            client.stream("GET", "/v1/approvals/events") as answer,
        ):
            events = read_sse(answer)
            until_ready(events)
            pending = served.execute("disk_clean")["approval_id"]
            assert next_about(events, pending).event == "requested"
            expired = next_about(events, pending)  # the sweeper runs every second
        assert (expired.event, expired.json()["status"]) == ("expired", "expired")
    finally:
        stop(served.process)


def test_the_stream_needs_a_token(live: Live) -> None:
    answer = httpx.get(f"{live.process.url}/v1/approvals/events", timeout=10)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthorized"
    bad = httpx.get(
        f"{live.process.url}/v1/approvals/events",
        headers={"Authorization": "Bearer ogs_nope"},
        timeout=10,
    )
    assert bad.status_code == 401


def test_an_idle_stream_carries_heartbeat_comments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app in a uvicorn of this process, so that the interval can be made short."""
    monkeypatch.setattr(approval_events, "HEARTBEAT_SECONDS", 0.2)
    skills = tmp_path / "skills"
    skills.mkdir()
    settings = make_settings(tmp_path, skills)
    store = open_store(settings.data_dir, None)
    token = store.tokens.create("vera", Role.VIEWER)[0]
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, store=store, loader_sink=lambda _line: None),
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, "uvicorn to start")
        headers = {"Authorization": f"Bearer {token}"}
        url = f"http://127.0.0.1:{port}"
        with (
            httpx.Client(base_url=url, headers=headers, timeout=10) as client,
            client.stream("GET", "/v1/approvals/events") as answer,
        ):
            seen = []
            for event in read_sse(answer, comments=True):
                seen.append(event)
                if sum(1 for e in seen if e.comment is not None) == 2:
                    break
        assert seen[0].event == "ready"
        assert all(e.comment.startswith("ping") for e in seen[1:] if e.comment is not None)
    finally:
        server.should_exit = True
        thread.join(15)
        store.close()


def test_a_graceful_stop_ends_an_open_stream_and_exits_0(tmp_path: Path) -> None:
    """An inbox stream never ends by itself: SIGTERM must not wait for it."""
    served = serve_with_tokens(tmp_path)
    with served.client("vera") as client, client.stream("GET", "/v1/approvals/events") as answer:
        events = read_sse(answer)
        until_ready(events)
        served.process.proc.send_signal(signal.SIGTERM)
        assert list(events) == []  # the stream ends, with no event
    served.process.proc.wait(timeout=15)
    assert served.process.proc.returncode == 0
    assert "stopped (SIGTERM)" in stop(served.process)
