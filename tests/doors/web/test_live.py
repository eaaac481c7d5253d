"""The live parts' event stream over plain HTTP: the session is required, events come as they
happen, ``end`` closes it, and a reconnecting browser goes on after the last id it saw."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ongrid_skills.doors.web.live import last_event_id
from tests.support.browser import Console

SSE = {"accept": "text/event-stream"}


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """Server-Sent Events as dicts: ``event``, ``id`` (or None), ``data`` (parsed JSON)."""
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if not line:
            if "event" in current:
                current["data"] = json.loads(current["data"])
                yield current
            current = {}
            continue
        field, _, value = line.partition(": ")
        if field in ("event", "id", "data"):
            current[field] = value


def start_gated(console: Console, gate: Path) -> str:
    response = console.rest(
        "POST",
        "/v1/skills/gated_wait/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    )
    assert response.status_code == 202, response.text
    execution_id: str = response.json()["id"]
    return execution_id


def test_the_stream_follows_a_running_execution_until_its_end(
    console: Console, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    execution_id = start_gated(console, gate)
    seen: list[dict[str, Any]] = []
    with console.logged_in("vera") as client:
        url = f"/executions/{execution_id}/events"
        with client.stream("GET", url, headers=SSE, timeout=30) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            assert "default-src 'self'" in response.headers["content-security-policy"]
            for event in events(response):
                seen.append(event)
                if event["event"] == "stderr":  # the call is running: let it finish now
                    gate.touch()
    kinds = [e["event"] for e in seen]
    assert kinds[0] == "status"
    assert seen[0]["data"]["status"] == "running"
    assert "stderr" in kinds
    assert kinds[-1] == "end"
    assert seen[-1]["data"]["status"] == "succeeded"
    assert seen[-1]["data"]["result"] == {"opened": True}
    numbered = [int(e["id"]) for e in seen if e.get("id")]
    assert numbered == list(range(1, len(numbered) + 1))


def test_a_reconnecting_stream_goes_on_after_the_last_event_id(
    console: Console, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.touch()  # runs through at once
    execution_id = start_gated(console, gate)
    with console.logged_in("vera") as client:
        url = f"/executions/{execution_id}/events"
        with client.stream("GET", url, headers=SSE, timeout=30) as response:
            everything = list(events(response))
        last = max(int(e["id"]) for e in everything if e.get("id"))
        with client.stream("GET", url, headers={**SSE, "last-event-id": str(last - 1)}) as again:
            rest = list(events(again))
    assert [e["id"] for e in rest if e.get("id")] == [str(last)]
    assert rest[-1]["event"] == "end"


def test_the_stream_needs_a_session_and_a_known_execution(console: Console) -> None:
    with console.http() as anonymous:
        refused = anonymous.get("/executions/abc/events", headers=SSE)
    with console.logged_in("vera") as client:
        unknown = client.get("/executions/no-such-id/events", headers=SSE)
    assert refused.status_code == 401  # a stream is not sent to the login page
    assert unknown.status_code == 404


def test_a_last_event_id_that_is_not_a_number_starts_from_the_beginning() -> None:
    assert last_event_id(None) == 0
    assert last_event_id("7") == 7
    assert last_event_id("-3") == 0
    assert last_event_id("9" * 40) == 0
    assert last_event_id("x") == 0
