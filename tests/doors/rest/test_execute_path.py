"""The execute route's lean path: a well-formed call is answered as the FastAPI route answers it,
anything else reaches the route with its body untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ongrid_skills.doors.rest.execute_path import ExecuteFastPath
from ongrid_skills.governance.principal import Principal
from ongrid_skills.types import Role
from tests.support.server import Server
from tests.support.skills import MakeSkill

EXECUTE = "/v1/skills/echo/execute"
#: A JSON media type FastAPI parses but the lean path leaves to the route.
ROUTE_JSON = "application/vnd.test+json"


@pytest.fixture
def server_skills(make_skill: MakeSkill) -> None:
    make_skill("echo", "#!/bin/sh\ncat\n")


class Next:
    """The rest of the door, as the lean path sees it: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        messages = [await receive()]
        while messages[-1]["type"] == "http.request" and messages[-1].get("more_body"):
            messages.append(await receive())
        self.calls.append((scope, messages))
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def drive(
    server: Server,
    pieces: list[dict[str, Any]],
    *,
    path: str = EXECUTE,
    method: str = "POST",
    headers: list[tuple[bytes, bytes]] | None = None,
    state: dict[str, Any] | None = None,
) -> tuple[Next, list[dict[str, Any]]]:
    """Run the lean path on one request (sent as ``pieces``) in the server's event loop."""
    after = Next()
    lean = ExecuteFastPath(after)
    sent: list[dict[str, Any]] = []
    queue = list(pieces)
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")] if headers is None else headers,
        "app": server.client.app,
        "state": {"principal": Principal("olga", Role.OPERATOR)} if state is None else state,
    }

    async def receive() -> dict[str, Any]:
        return queue.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        await lean(scope, receive, send)

    server.client.portal.call(run)  # type: ignore[attr-defined]
    return after, sent


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


def test_a_well_formed_call_is_answered_without_the_route(server: Server) -> None:
    after, sent = drive(server, [body(b'{"args": ', more=True), body(b'{"x": 1}}')])
    assert after.calls == []
    start, end = sent
    assert start["status"] == 200
    assert dict(start["headers"])[b"content-type"] == b"application/json"
    assert int(dict(start["headers"])[b"content-length"]) == len(end["body"])
    answer = json.loads(end["body"])
    assert answer["status"] == "succeeded"
    assert answer["result"] == {"x": 1}
    assert answer["requested_by"] == "olga"
    stored = server.call("GET", f"/v1/executions/{answer['id']}").json()
    assert stored["status"] == "succeeded"
    started = server.call("GET", "/v1/audit", params={"action": "execution.started"}).json()
    assert [e["subject"] for e in started["items"]] == [answer["id"]]


def as_route(server: Server) -> dict[str, str]:
    """Olga's headers with a JSON type only the route takes."""
    return {**server.as_("olga"), "content-type": ROUTE_JSON}


VOLATILE = {"id", "created_at", "started_at", "finished_at", "duration_ms"}


def test_the_lean_answer_is_the_routes_answer(server: Server) -> None:
    args = {"args": {"n": 1, "s": "é"}}
    lean = server.call("POST", EXECUTE, "olga", json=args)
    route = server.client.post(EXECUTE, content=json.dumps(args), headers=as_route(server))
    assert lean.status_code == route.status_code == 200
    assert lean.headers["content-type"] == route.headers["content-type"]
    assert set(lean.json()) == set(route.json())
    for key in set(lean.json()) - VOLATILE:
        assert lean.json()[key] == route.json()[key], key


def test_a_refused_call_gets_the_routes_error_document(server: Server) -> None:
    missing = "/v1/skills/nope/execute"
    lean = server.call("POST", missing, "olga", json={"args": {}})
    route = server.client.post(missing, content=b'{"args": {}}', headers=as_route(server))
    assert lean.status_code == route.status_code == 404
    assert lean.json() == route.json()
    assert lean.json()["error"]["code"] == "not_found"


def test_an_idempotency_key_returns_the_first_call(server: Server) -> None:
    headers = {"Idempotency-Key": "k-1"}
    headers.update(server.as_("olga"))
    first = server.client.post(EXECUTE, json={"args": {"a": 1}}, headers=headers)
    again = server.client.post(EXECUTE, json={"args": {"a": 1}}, headers=headers)
    assert first.json()["id"] == again.json()["id"]
    other = server.client.post(EXECUTE, json={"args": {"a": 2}}, headers=headers)
    assert other.status_code == 409


JSON = (b"content-type", b"application/json")
PASSED_ON: dict[str, tuple[dict[str, Any], bytes]] = {
    "a repeated key": ({}, b'{"confirm": false, "confirm": true}'),
    "not JSON": ({}, b"{args: 1}"),
    "an empty body": ({}, b""),
    "a string for confirm": ({}, b'{"confirm": "yes"}'),
    "an unknown field": ({}, b'{"args": {}, "force": true}'),
    "args and params": ({}, b'{"args": {}, "params": {}}'),
    "an array body": ({}, b"[1]"),
    "NaN in args": ({}, b'{"args": {"a": NaN}}'),
    "a persona of 129 characters": ({}, b'{"persona": "' + b"p" * 129 + b'"}'),
    "no content type": ({"headers": []}, b"{}"),
    "a text content type": ({"headers": [(b"content-type", b"text/plain")]}, b"{}"),
    "a +json content type": ({"headers": [(b"content-type", ROUTE_JSON.encode())]}, b"{}"),
    "two content types": ({"headers": [JSON, JSON]}, b"{}"),
    "two idempotency keys": (
        {"headers": [JSON, (b"idempotency-key", b"a"), (b"idempotency-key", b"b")]},
        b"{}",
    ),
    "an idempotency key of 201 characters": (
        {"headers": [JSON, (b"idempotency-key", b"k" * 201)]},
        b"{}",
    ),
    "a GET": ({"method": "GET"}, b""),
    "another route": ({"path": "/v1/skills/echo"}, b"{}"),
    "a name with a slash": ({"path": "/v1/skills/a/b/execute"}, b"{}"),
    "an empty name": ({"path": "/v1/skills//execute"}, b"{}"),
    "a trailing slash": ({"path": EXECUTE + "/"}, b"{}"),
}


@pytest.mark.parametrize("case", list(PASSED_ON))
def test_a_request_it_cannot_answer_reaches_the_route_untouched(server: Server, case: str) -> None:
    options, data = PASSED_ON[case]
    half = len(data) // 2
    after, sent = drive(server, [body(data[:half], more=True), body(data[half:])], **options)
    assert sent[0]["status"] == 299  # the route's answer, not one of the lean path
    [(scope, messages)] = after.calls
    assert b"".join(m.get("body", b"") for m in messages) == data
    assert scope["headers"] == options.get("headers", [JSON])
    assert server.call("GET", "/v1/executions").json()["items"] == []


@pytest.mark.parametrize("state", [{}, {"principal": "olga"}])
def test_a_request_the_token_gate_did_not_mark_reaches_the_route(
    server: Server, state: dict[str, Any]
) -> None:
    after, sent = drive(server, [body(b"{}")], state=state)
    assert sent[0]["status"] == 299
    assert len(after.calls) == 1


def test_a_client_that_leaves_mid_body_reaches_the_route_with_what_it_sent(
    server: Server,
) -> None:
    gone = {"type": "http.disconnect"}
    after, sent = drive(server, [body(b'{"args": ', more=True), gone])
    [(_scope, messages)] = after.calls
    assert messages == [body(b'{"args": ', more=True), gone]
    assert sent[0]["status"] == 299
