"""Hostile requests: every one gets a clear 4xx in the error shape, never a 500, and nothing runs.

Bodies go through the TestClient (the app's own parsing and limits); what only a real socket can
send (a huge header, a body without length, a bad Content-Length) goes to a real `serve`.
"""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.server import ServeProcess, Server, ServerCheck, start_serve, stop
from tests.support.skills import MakeSkill, write_skill

MIB = 1024 * 1024
EXECUTE = "/v1/skills/echo_runs/execute"


def echo_runs_script(runs: Path) -> str:
    """Appends one line per run to ``runs`` and answers its args back."""
    return f"#!/bin/sh\nargs=$(cat)\necho run >> '{runs}'\nprintf '%s' \"$args\"\n"


def error_of(response: httpx.Response, status: int | range, code: str | None) -> dict[str, Any]:
    statuses = status if isinstance(status, range) else range(status, status + 1)
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    assert isinstance(body["error"]["details"], list)
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return tmp_path / "runs.log"


@pytest.fixture
def server_skills(make_skill: MakeSkill, runs: Path) -> None:
    make_skill("echo_runs", echo_runs_script(runs))
    make_skill(
        "typed",
        echo_runs_script(runs),
        schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )


def unharmed(srv: Server) -> None:
    """Still answering, its audit chain intact, nothing left running or pending."""
    assert srv.client.get("/v1/health").json()["status"] == "ok"
    assert srv.call("GET", "/v1/audit/verify").json()["ok"] is True
    for row in srv.call("GET", "/v1/executions", params={"limit": 500}).json()["items"]:
        assert row["status"] not in ("running", "pending_approval"), row


@pytest.fixture
def server_checks() -> list[ServerCheck]:
    return [unharmed]


def post_raw(srv: Server, body: bytes, path: str = EXECUTE, **headers: str) -> httpx.Response:
    merged = {**srv.as_("olga"), "content-type": "application/json", **headers}
    return srv.client.post(path, content=body, headers=merged)


# ---- bodies -----------------------------------------------------------------------------------
NOT_AN_OBJECT = [
    b"{nope",
    b'{"args": {}',
    b"\xff\xfe\xfa",
    b'{"args": {"x": "\xe9"}}',  # latin-1, not UTF-8
    b"[]",
    b'[{"args": {}}]',
    b'"args"',
    b"42",
    b"-1.5e3",
    b"true",
    b"null",
    b"",
    b'{"args": {}} {"args": {}}',
    b"\x00",
]


def test_a_body_that_is_not_a_json_object_gets_400_invalid_request(
    server: Server, runs: Path
) -> None:
    for body in NOT_AN_OBJECT:
        error_of(post_raw(server, body), 400, "invalid_request")
    assert not runs.exists()
    assert server.call("GET", "/v1/executions").json()["items"] == []


WRONG_TYPES: list[tuple[dict[str, Any], str, str]] = [
    ({"args": 5}, "invalid_args", ""),
    ({"args": "x"}, "invalid_args", ""),
    ({"args": [1, 2]}, "invalid_args", ""),
    ({"args": True}, "invalid_args", ""),
    ({"params": 5}, "invalid_args", ""),
    ({"confirm": "yes"}, "invalid_request", "/confirm"),
    ({"confirm": "true"}, "invalid_request", "/confirm"),
    ({"confirm": 1}, "invalid_request", "/confirm"),
    ({"confirm": None}, "invalid_request", "/confirm"),
    ({"wait": None}, "invalid_request", "/wait"),
    ({"wait": "false"}, "invalid_request", "/wait"),
    ({"wait": 0}, "invalid_request", "/wait"),
    ({"persona": 123}, "invalid_request", "/persona"),
    ({"persona": ["default"]}, "invalid_request", "/persona"),
    ({"persona": {"name": "default"}}, "invalid_request", "/persona"),
    ({"persona": "p" * 129}, "invalid_request", "/persona"),
]


def test_fields_of_the_wrong_type_get_400_naming_the_field(server: Server, runs: Path) -> None:
    for body, code, pointer in WRONG_TYPES:
        error = error_of(post_raw(server, json.dumps(body).encode()), 400, code)
        if pointer:
            assert pointer in [d["pointer"] for d in error["details"]], (body, error)
    assert not runs.exists()


def test_a_string_is_never_taken_for_the_human_confirmation(
    server: Server, make_skill: MakeSkill
) -> None:
    make_skill("wipe", **{"class": "mutating"})
    server.call("POST", "/v1/reload")
    for confirm in ("yes", "true", "1", 1):
        response = server.call("POST", "/v1/skills/wipe/execute", "olga", json={"confirm": confirm})
        error_of(response, 400, "invalid_request")
    assert server.call("GET", "/v1/approvals").json()["items"] == []


def test_unknown_fields_get_400_naming_the_field(server: Server, runs: Path) -> None:
    for body, field in [
        ({"argz": {}}, "/argz"),
        ({"args": {}, "sudo": True}, "/sudo"),
        ({"args": {}, "Confirm": True}, "/Confirm"),
        ({"args": {}, "requested_by": "admin"}, "/requested_by"),
    ]:
        error = error_of(post_raw(server, json.dumps(body).encode()), 400, "invalid_request")
        assert field in [d["pointer"] for d in error["details"]]
    assert not runs.exists()


def test_args_and_params_together_get_400(server: Server, runs: Path) -> None:
    error_of(post_raw(server, b'{"args": {}, "params": {}}'), 400, "invalid_request")
    assert not runs.exists()


DUPLICATES: list[tuple[bytes, str, str]] = [
    (b'{"args": {}, "confirm": false, "confirm": true}', "$.confirm", "/confirm"),
    # the same key once escaped: one key for JSON, so one key for us
    (b'{"args": {}, "confirm": false, "\\u0063onfirm": true}', "$.confirm", "/confirm"),
    (b'{"\\u0061rgs": {"n": 1}, "args": {"n": 2}}', "$.args", "/args"),
    (b'{"args": {"n": 1, "n": 2}}', "$.args.n", "/args/n"),
    (
        b'{"args": {"n": 1, "list": [{"a": 1}, {"b": 1, "b": 2}]}}',
        "$.args.list[1].b",
        "/args/list/1/b",
    ),
    (b'{"args": {"n": 1, "a b": 0, "a b": 1}}', '$.args["a b"]', "/args/a b"),
    (b'{"args": {"n": 1},\n "persona": "default",\n "persona": "root"}', "$.persona", "/persona"),
]


def test_a_body_naming_a_key_twice_gets_400_naming_the_key_and_its_path(
    server: Server, make_skill: MakeSkill, runs: Path
) -> None:
    make_skill("wipe", echo_runs_script(runs), **{"class": "mutating"})
    server.call("POST", "/v1/reload")
    for body, path, pointer in DUPLICATES:
        for skill in ("typed", "wipe"):
            response = post_raw(server, body, f"/v1/skills/{skill}/execute")
            error = error_of(response, 400, "invalid_request")
            key = pointer.rsplit("/", 1)[1]
            assert f'duplicate key "{key}" at {path}' in error["message"], (body, error)
            assert [d["pointer"] for d in error["details"]] == [pointer], (body, error)
    assert not runs.exists()
    assert server.call("GET", "/v1/executions").json()["items"] == []
    assert server.call("GET", "/v1/approvals").json()["items"] == []


def test_the_line_and_column_of_the_second_key_are_given(server: Server) -> None:
    body = b'{"args": {"n": 1},\n  "wait": true,\n  "wait": false}'
    error = error_of(post_raw(server, body, "/v1/skills/typed/execute"), 400, "invalid_request")
    assert "(line 3 column 3)" in error["message"]


def test_an_approval_decision_naming_a_key_twice_gets_400(
    server: Server, make_skill: MakeSkill, runs: Path
) -> None:
    make_skill("wipe", echo_runs_script(runs), **{"class": "mutating"})
    server.call("POST", "/v1/reload")
    pending = server.call("POST", "/v1/skills/wipe/execute", "olga", json={"args": {}}).json()
    path = f"/v1/approvals/{pending['approval_id']}/approve"
    response = post_raw(
        server, b'{"comment": "fine", "comment": "not fine"}', path, **server.as_("oscar")
    )
    error = error_of(response, 400, "invalid_request")
    assert "$.comment" in error["message"]
    approval = server.call("GET", f"/v1/approvals/{pending['approval_id']}").json()
    assert approval["status"] == "pending"
    assert not runs.exists()
    assert server.call("POST", f"{path[: -len('approve')]}reject", "oscar").status_code == 200


def test_the_same_key_in_sibling_objects_is_no_duplicate(server: Server, runs: Path) -> None:
    body = b'{"args": {"n": 1, "x": {"a": 1}, "y": {"a": 2}, "z": [{"a": 3}, {"a": 4}]}}'
    response = post_raw(server, body, "/v1/skills/typed/execute")
    assert response.status_code == 200, response.text
    assert response.json()["result"] == {
        "n": 1,
        "x": {"a": 1},
        "y": {"a": 2},
        "z": [{"a": 3}, {"a": 4}],
    }


def test_a_caller_without_a_token_gets_401_before_its_body_is_read(server: Server) -> None:
    response = server.client.post(
        EXECUTE,
        content=b'{"confirm": false, "confirm": true}',
        headers={"content-type": "application/json"},
    )
    error_of(response, 401, "unauthorized")


def padded(size: int) -> bytes:
    """A valid execute body of exactly ``size`` bytes."""
    skeleton = b'{"args": {"pad": ""}}'
    return skeleton.replace(b'""', b'"' + b"a" * (size - len(skeleton)) + b'"')


def test_a_body_of_exactly_one_mib_is_accepted(server: Server, runs: Path) -> None:
    response = post_raw(server, padded(MIB))
    assert response.status_code == 200, response.text[:200]
    assert len(response.json()["result"]["pad"]) == MIB - 21
    assert runs.read_text() == "run\n"


def test_a_body_over_one_mib_with_a_content_length_gets_413_too_large(
    server: Server, runs: Path
) -> None:
    for size in (MIB + 1, 2 * MIB):
        error_of(post_raw(server, padded(size)), 413, "too_large")
    assert not runs.exists()


def test_a_body_over_one_mib_without_a_length_gets_413_too_large(
    server: Server, runs: Path
) -> None:
    def chunks() -> Iterator[bytes]:
        body = padded(2 * MIB)
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    response = server.client.post(
        EXECUTE,
        content=chunks(),
        headers={**server.as_("olga"), "content-type": "application/json"},
    )
    assert "content-length" not in response.request.headers
    error_of(response, 413, "too_large")
    assert not runs.exists()


def test_a_bad_content_length_gets_400(server: Server, runs: Path) -> None:
    for value in ("abc", "-1", "+2", " 2", "1_0", "1.5", "", "0x10"):
        response = post_raw(server, b"{}", **{"content-length": value})
        error_of(response, 400, "invalid_request")
    assert not runs.exists()


def test_deeply_nested_args_get_400_and_never_a_500(server: Server, runs: Path) -> None:
    for depth in (65, 300, 950, 990, 10_000):
        for opening, closing in (("[", "]"), ('{"a":', "}")):
            inner = opening * depth + ("1" if opening != "[" else "") + closing * depth
            body = ('{"args": {"x": ' + inner + "}}").encode()
            error = error_of(post_raw(server, body), 400, "invalid_request")
            assert "nest" in error["message"] or "pars" in error["message"], error
    assert not runs.exists()
    ok = '{"a":' * 63 + "1" + "}" * 63
    response = post_raw(server, ('{"args": ' + ok + "}").encode())
    assert response.status_code == 200
    assert runs.read_text() == "run\n"


UNCARRIABLE_ARGS = [
    b'{"x": NaN}',
    b'{"x": Infinity}',
    b'{"x": -Infinity}',
    b'{"x": 1e400}',
    b'{"x": "\\ud800"}',
    b'{"\\udfff": 1}',
    b'{"x": ["ok", {"y": "\\udc00tail"}]}',
]


def test_args_json_cannot_carry_get_400_before_anything_runs(server: Server, runs: Path) -> None:
    for args in UNCARRIABLE_ARGS:
        error = error_of(post_raw(server, b'{"args": ' + args + b"}"), 400, "invalid_request")
        assert "args" in error["message"], args
    assert not runs.exists()
    assert server.call("GET", "/v1/executions").json()["items"] == []


def test_nul_bytes_inside_args_strings_travel_verbatim(server: Server) -> None:
    response = post_raw(server, b'{"args": {"x": "a\\u0000b", "k\\u0000": 1}}')
    assert response.status_code == 200
    assert response.json()["result"] == {"x": "a\x00b", "k\x00": 1}


def test_invalid_args_against_the_schema_get_400_with_pointers(server: Server, runs: Path) -> None:
    path = "/v1/skills/typed/execute"
    for args in ({}, {"n": "one"}, {"n": 1.5}, {"n": [1]}):
        response = post_raw(server, json.dumps({"args": args}).encode(), path)
        error = error_of(response, 400, "invalid_args")
        assert all({"pointer", "message"} <= set(d) for d in error["details"])
    assert not runs.exists()


# ---- names in paths -------------------------------------------------------------------------
HOSTILE_NAMES = [
    "..%2f..%2fetc",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "%2e%2e%2f%2e%2e%2fecho_runs",
    "echo_runs%00",
    "a%00b",
    "%ff%fe",
    "%ED%A0%80",
    "echo%20runs",
    "ECHO_RUNS",
    "n" * 10_000,
    "%25",
    "*",
]


def test_hostile_skill_names_get_404_and_run_nothing(server: Server, runs: Path) -> None:
    for name in HOSTILE_NAMES:
        response = server.call("POST", f"/v1/skills/{name}/execute", "olga", json={"args": {}})
        error_of(response, 404, "not_found")
        error_of(server.call("GET", f"/v1/skills/{name}", "olga"), 404, "not_found")
        error_of(server.call("GET", f"/v1/executions/{name}", "olga"), 404, "not_found")
        error_of(server.call("GET", f"/v1/approvals/{name}", "olga"), 404, "not_found")
    assert not runs.exists()
    refused = server.call("GET", "/v1/audit", params={"action": "execution.refused"}).json()
    assert refused["items"]
    assert all(len(e["data"]["skill"]) <= 200 for e in refused["items"])


def test_hostile_query_values_are_plain_filters(server: Server) -> None:
    for value in ("%00", "%ff", "%ED%A0%80", "' OR 1=1 --", "*", "n" * 150):
        for path in ("/v1/executions?skill=", "/v1/approvals?status=", "/v1/audit?actor="):
            response = server.call("GET", path + value, "vera")
            assert response.status_code == 200, (path, value, response.text[:200])
            assert response.json()["items"] == []
        response = server.call("GET", "/v1/skills?category=" + value, "vera")
        assert response.json() == {"items": [], "total": 0}


def test_an_idempotency_key_over_200_characters_gets_400(server: Server, runs: Path) -> None:
    error = error_of(post_raw(server, b"{}", **{"Idempotency-Key": "k" * 201}), 400, None)
    assert error["code"] == "invalid_request"
    assert "header" in error["message"]
    assert not runs.exists()


def test_an_authorization_header_of_10_kb_gets_401(server: Server) -> None:
    for value in ("Bearer " + "A" * 10_240, "A" * 10_240, "Bearer ogs_" + "x" * 10_240):
        response = server.client.get("/v1/skills", headers={"Authorization": value})
        error_of(response, 401, "unauthorized")


# ---- a real socket ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, str, Path]]:
    base = tmp_path_factory.mktemp("hostile-live")
    skills = base / "skills"
    skills.mkdir()
    runs = base / "runs.log"
    write_skill(skills, "echo_runs", echo_runs_script(runs))
    data = base / "data"
    store = open_store(str(data), None)
    token = store.tokens.create("olga", Role.OPERATOR)[0]
    store.close()
    process = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)})
    try:
        yield process, token, runs
    finally:
        stop(process)


def exchange(url: str, head: bytes, rest: Iterable[bytes] = ()) -> tuple[int, bytes]:
    """Send ``head`` then ``rest`` piece by piece, stopping as soon as the server answers.

    Returns the status and the body of the answer (read up to its Content-Length or EOF).
    """
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head)
        for piece in rest:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(piece)
            except OSError:  # the server answered and closed while we were still sending
                break
        data = b""
        while True:
            try:
                part = sock.recv(65536)
            except OSError:
                break
            if not part:
                break
            data += part
            head_end = data.find(b"\r\n\r\n")
            if head_end >= 0:
                length = _content_length(data[:head_end])
                if length is not None and len(data) - head_end - 4 >= length:
                    break
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    head_end = data.find(b"\r\n\r\n")
    return int(data[9:12]), data[head_end + 4 :]


def _content_length(head: bytes) -> int | None:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return None


def request_head(token: str, *lines: str, path: str = EXECUTE) -> bytes:
    fields = ["Host: 127.0.0.1", f"Authorization: Bearer {token}", *lines]
    return (f"POST {path} HTTP/1.1\r\n" + "".join(f"{f}\r\n" for f in fields) + "\r\n").encode()


def assert_still_healthy(process: ServeProcess, token: str) -> None:
    assert process.proc.poll() is None
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{process.url}/v1/health", timeout=10).json()["status"] == "ok"
    verify = httpx.get(f"{process.url}/v1/audit/verify", headers=headers, timeout=10)
    assert verify.json()["ok"] is True
    ok = httpx.post(f"{process.url}{EXECUTE}", json={"args": {"a": 1}}, headers=headers, timeout=20)
    assert ok.json()["result"] == {"a": 1}


def test_a_2_mib_body_with_a_length_gets_413_from_a_real_server(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, runs = live
    body = padded(2 * MIB)
    head = request_head(token, "Content-Type: application/json", f"Content-Length: {len(body)}")
    pieces = (body[i : i + 65536] for i in range(0, len(body), 65536))
    status, answer = exchange(process.url, head, pieces)
    assert status == 413
    assert json.loads(answer)["error"]["code"] == "too_large"
    assert not runs.exists()
    assert_still_healthy(process, token)


def test_a_2_mib_chunked_body_without_a_length_gets_413_from_a_real_server(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, runs = live
    before = runs.read_text() if runs.exists() else ""
    head = request_head(token, "Content-Type: application/json", "Transfer-Encoding: chunked")
    body = padded(2 * MIB)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65536):
            piece = body[start : start + 65536]
            yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
        yield b"0\r\n\r\n"

    status, answer = exchange(process.url, head, chunks())
    assert status == 413
    assert (runs.read_text() if runs.exists() else "") == before
    assert json.loads(answer)["error"] == {
        "code": "too_large",
        "message": "request body over 1048576 bytes",
        "details": [],
    }
    assert_still_healthy(process, token)
    assert runs.read_text() == before + "run\n"  # only the health check's own call


def test_a_huge_header_gets_a_4xx_and_the_server_keeps_working(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, _ = live
    head = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: "
    filler = (b"h" * 16_384 for _ in range(64))  # 1 MiB of one header, never finished
    status, _ = exchange(process.url, head, filler)
    assert 400 <= status < 500
    assert_still_healthy(process, token)


def test_a_very_long_url_gets_a_4xx_and_the_server_keeps_working(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, _ = live
    head = b"GET /v1/skills/"
    tail = [b"n" * 16_384 for _ in range(16)] + [b" HTTP/1.1\r\nHost: x\r\n\r\n"]
    status, _ = exchange(process.url, head, tail)
    assert 400 <= status < 500
    assert_still_healthy(process, token)


def test_a_bad_content_length_gets_a_4xx_from_a_real_server(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, runs = live
    before = runs.read_text() if runs.exists() else ""
    for value in ("abc", "-5", "1, 2", "99999999999999999999999999"):
        head = request_head(token, "Content-Type: application/json", f"Content-Length: {value}")
        status, _ = exchange(process.url, head + b"{}")
        assert 400 <= status < 500, value
    assert (runs.read_text() if runs.exists() else "") == before
    assert_still_healthy(process, token)


def test_a_10_kb_authorization_header_gets_401_from_a_real_server(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, _ = live
    response = httpx.get(
        f"{process.url}/v1/skills", headers={"Authorization": "Bearer " + "A" * 10_240}
    )
    error_of(response, 401, "unauthorized")
    assert_still_healthy(process, token)


TRAVERSALS = [
    "/v1/skills/../../etc/passwd/execute",
    "/v1/skills/..%2f..%2fetc/execute",
    "/v1/skills/%2e%2e%2f%2e%2e%2fetc%2fpasswd/execute",
    "/v1/skills/echo_runs%00/execute",
    "/v1/skills/echo_runs/../echo_runs/execute",
]


def test_path_traversal_in_a_name_gets_4xx_from_a_real_server(
    live: tuple[ServeProcess, str, Path],
) -> None:
    process, token, runs = live
    before = runs.read_text() if runs.exists() else ""
    for path in TRAVERSALS:
        head = request_head(token, "Content-Type: application/json", "Content-Length: 2", path=path)
        status, answer = exchange(process.url, head + b"{}")
        assert 400 <= status < 500, (path, answer[:200])
        assert set(json.loads(answer)) == {"error"}
    assert (runs.read_text() if runs.exists() else "") == before
    assert_still_healthy(process, token)
