"""The console's headers on every kind of answer, and the refusal of cross-site and forged
state changes (CSRF), over plain HTTP against the served console."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute

from ongrid_skills.doors.web.forms import checked_form, checked_upload
from ongrid_skills.doors.web.security import CSP, cross_site_problem, csrf_token, origin_of
from tests.support.browser import Console, console_server

HEADERS = {
    "content-security-policy": CSP,
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "x-content-type-options": "nosniff",
}


def registry_reloads(console: Console) -> int:
    return len(console.store.audit.entries(limit=1000, action="registry.reloaded"))


def test_every_answer_of_the_console_carries_the_security_headers(console: Console) -> None:
    with console.logged_in("admin") as client:
        page = client.get("/skills")
        css = client.get(page.text.split('rel="stylesheet" href="', 1)[1].split('"', 1)[0])
        answers = {
            "page": page,
            "skill page": client.get("/skills/host_info"),
            "home": client.get("/"),
            "redirect": client.get("/login"),  # logged in already: on to the home
            "static": css,
            "favicon": client.get("/favicon.ico"),
            "unknown page": client.get("/nowhere"),
            "unknown skill": client.get("/skills/no_such_skill"),
            "bad query": client.get("/skills?page=0"),
            "wrong method": client.delete("/skills"),
            "no csrf": client.post("/reload", data={"other": "1"}),
            "cross-site": client.post("/reload", headers={"sec-fetch-site": "cross-site"}),
        }
    with console.http() as anonymous:
        answers["login page"] = anonymous.get("/login")
        answers["anonymous redirect"] = anonymous.get("/skills")
        answers["anonymous post"] = anonymous.post("/logout", data={"csrf": "x"})
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {
        "page": 200,
        "skill page": 200,
        "home": 200,
        "redirect": 303,
        "static": 200,
        "favicon": 200,
        "unknown page": 404,
        "unknown skill": 404,
        "bad query": 400,
        "wrong method": 405,
        "no csrf": 403,
        "cross-site": 403,
        "login page": 200,
        "anonymous redirect": 303,
        "anonymous post": 401,
    }
    for name, answer in answers.items():
        for header, value in HEADERS.items():
            assert answer.headers.get(header) == value, (name, header)
    assert "default-src 'self'" in CSP
    assert page.headers["cache-control"] == "no-store"


def test_the_api_keeps_its_json_answers_beside_the_console(console: Console) -> None:
    """/v1, /mcp, /metrics and /openapi.json stay the REST door's: JSON 401s."""
    for path in ("/v1/skills", "/v1/nowhere", "/metrics", "/openapi.json"):
        with console.http() as client:
            response = client.get(path)
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "unauthorized"
    assert console.rest("GET", "/v1/skills/host_info", "vera").status_code == 200


def test_a_post_without_the_csrf_token_changes_nothing(console: Console) -> None:
    before = registry_reloads(console)
    with console.logged_in("admin") as client:
        missing = client.post("/reload", data={"other": "1"})
        wrong = client.post("/reload", data={"csrf": "0" * 64})
        empty = client.post("/reload", data={"csrf": ""})
        still = client.get("/skills")
    assert [missing.status_code, wrong.status_code, empty.status_code] == [403, 403, 403]
    assert "CSRF" in missing.text
    assert still.status_code == 200  # refused, and the session is still there
    assert registry_reloads(console) == before


def test_the_csrf_token_of_another_session_is_refused(console: Console) -> None:
    before = registry_reloads(console)
    with console.logged_in("admin") as mine, console.logged_in("admin2") as theirs:
        stolen = console.csrf(theirs)
        response = mine.post("/reload", data={"csrf": stolen})
    assert response.status_code == 403
    assert registry_reloads(console) == before


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "https://127.0.0.1"},  # our host, another scheme: another origin
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},  # a sibling host or port
        {"sec-fetch-site": "same-origin", "origin": "http://evil.example"},
        {"origin": "null"},  # a sandboxed frame, a data: URL, a file: page
        {"sec-fetch-site": "same-origin", "origin": "null"},
    ],
)
def test_a_post_from_another_origin_is_refused_even_with_the_right_token(
    console: Console, headers: dict[str, str]
) -> None:
    before = registry_reloads(console)
    with console.logged_in("admin") as client:
        response = client.post("/reload", data={"csrf": console.csrf(client)}, headers=headers)
    assert response.status_code == 403
    assert registry_reloads(console) == before


def test_a_post_of_our_own_page_passes_with_its_origin(console: Console) -> None:
    """Under ``Referrer-Policy: same-origin`` browsers send our origin with our forms' posts
    (``no-referrer`` made them send ``Origin: null``, which is now refused)."""
    before = registry_reloads(console)
    with console.logged_in("admin") as client:
        own = {"origin": console.url, "sec-fetch-site": "same-origin"}
        first = client.post("/reload", data={"csrf": console.csrf(client)}, headers=own)
        by_header = client.post(
            "/reload", headers={"x-csrf-token": console.csrf(client), **own}, data={}
        )
    assert [first.status_code, by_header.status_code] == [303, 303]
    assert first.headers["location"].startswith("/skills?reloaded=")
    assert registry_reloads(console) == before + 2


def test_behind_a_tls_proxy_a_post_from_the_public_urls_origin_passes(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The proxy is not listed in ONGRID_TRUSTED_PROXIES: the request says http, the browser
    https://ops.example; the operator's ONGRID_PUBLIC_URL names the console's own origin."""
    base = tmp_path_factory.mktemp("public")
    with console_server(base, public_url="https://ops.example/") as served:
        before = registry_reloads(served)
        with served.logged_in("admin") as client:
            answers = [
                client.post(
                    "/reload", data={"csrf": served.csrf(client)}, headers={"origin": origin}
                ).status_code
                for origin in ("https://ops.example", "https://evil.example", "null")
            ]
        assert answers == [303, 403, 403]
        assert registry_reloads(served) == before + 1


def test_the_same_origin_check_reads_the_host_and_scheme_of_the_request() -> None:
    scope = {
        "type": "http",
        "scheme": "http",
        "headers": [(b"host", b"ops.example:8731"), (b"origin", b"http://ops.example:8731")],
    }
    assert cross_site_problem(scope) is None
    scope["headers"] = [(b"host", b"ops.example:8731"), (b"origin", b"http://ops.example:9999")]
    assert cross_site_problem(scope) == "the request comes from another origin"
    scope["headers"] = [(b"host", b"ops.example:8731"), (b"origin", b"null")]
    assert cross_site_problem(scope) == "the request comes from an opaque origin (null)"
    scope["headers"] = [(b"host", b"ops.example"), (b"sec-fetch-site", b"none")]
    assert cross_site_problem(scope) is None
    # Behind a TLS proxy the request says http: the public URL's origin is ours too.
    scope["headers"] = [(b"host", b"ops.example"), (b"origin", b"https://ops.example")]
    assert cross_site_problem(scope) == "the request comes from another origin"
    public = origin_of("https://OPS.example:443/console")
    assert cross_site_problem(scope, public) is None
    scope["headers"] = [(b"host", b"ops.example"), (b"origin", b"https://evil.example")]
    assert cross_site_problem(scope, public) == "the request comes from another origin"


def test_a_sessions_csrf_token_is_stable_and_tells_nothing_of_the_session_id() -> None:
    session_id = "a" * 43
    assert csrf_token(session_id) == csrf_token(session_id)
    assert csrf_token(session_id) != csrf_token("b" * 43)
    assert session_id not in csrf_token(session_id)


def dependency_calls(dependant: object) -> set[object]:
    found: set[object] = set()
    for sub in getattr(dependant, "dependencies", ()):
        found.add(sub.call)
        found |= dependency_calls(sub)
    return found


def all_routes(routes: list[Any]) -> Iterator[Any]:
    """Routes, those of included routers too (FastAPI keeps an included router as one entry)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from all_routes(included.routes)
        else:
            yield route


def test_every_route_that_changes_state_checks_the_csrf_form(console: Console) -> None:
    """The rule of forms.py, held for every route a page family adds: an unsafe method means
    the CheckedForm dependency, or CheckedUpload for a form with files (only the login form,
    without a session yet, has its own)."""
    unsafe = []
    for route in all_routes(console.web.routes):
        methods = set(getattr(route, "methods", None) or ()) - {"GET", "HEAD", "OPTIONS"}
        if not methods:
            continue
        assert isinstance(route, APIRoute), f"{route.path}: a state change needs an APIRoute"
        unsafe.append(route.path)
        if route.path != "/login":
            checks = {checked_form, checked_upload} & set(dependency_calls(route.dependant))
            assert len(checks) == 1, route.path
    assert {"/login", "/logout", "/reload", "/packs/upload"} <= set(unsafe)
