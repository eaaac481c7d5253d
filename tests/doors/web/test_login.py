"""Logging in and out over plain HTTP against the served console: the session cookie, where the
token goes (nowhere), redirects, the login form's own CSRF nonce, throttling and auditing."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from ongrid_skills.doors.web.login import safe_next
from ongrid_skills.doors.web.throttle import MAX_FAILURES, LoginThrottle
from tests.support.browser import Console, console_server, csrf_of, login_http


def set_cookies(response: object) -> dict[str, str]:
    """The Set-Cookie headers of a response by cookie name (the raw header of each)."""
    headers = response.headers.get_list("set-cookie")  # type: ignore[attr-defined]
    return {header.split("=", 1)[0]: header for header in headers}


def test_a_browser_without_a_session_is_sent_from_slash_to_the_login_page(
    console: Console,
) -> None:
    with console.http() as client:
        response = client.get("/", headers={"accept": "text/html"})
        assert response.status_code == 303
        assert response.headers["location"] == "/login?next=/"
        page = client.get("/login?next=/")
    assert page.status_code == 200
    assert 'name="token" type="password"' in page.text
    assert page.headers["content-type"].startswith("text/html")


def test_a_token_opens_a_session_in_an_httponly_strict_cookie_and_never_comes_back(
    console: Console,
) -> None:
    with console.http() as client:
        response = login_http(client, console.tokens["olga"], next_path="/skills?q=port")
        session = set_cookies(response)["ongrid_session"]
        page = client.get("/skills?q=port")
    assert response.status_code == 303
    assert response.headers["location"] == "/skills?q=port"
    flags = [part.strip().lower() for part in session.split(";")]
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "path=/" in flags
    assert "secure" not in flags  # plain HTTP here: see the TLS test below
    assert page.status_code == 200
    assert "olga" in page.text
    assert console.tokens["olga"] not in page.text
    assert console.tokens["olga"] not in response.text


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """A console whose operator lists the proxies in front of it (loopback, and a network)."""
    with console_server(
        tmp_path_factory.mktemp("proxied"), trusted_proxies=("127.0.0.1", "10.0.0.0/8")
    ) as served:
        yield served


def test_the_session_cookie_is_secure_when_a_listed_proxy_says_the_request_came_over_tls(
    proxied: Console,
) -> None:
    """What a TLS-terminating proxy listed in ONGRID_TRUSTED_PROXIES sends."""
    with proxied.http(headers={"x-forwarded-proto": "https"}) as client:
        form = client.get("/login")
        nonce = SimpleCookie(set_cookies(form)["ongrid_login"])["ongrid_login"]
        client.cookies.clear()  # a Secure cookie: httpx would not send it over http
        response = client.post(
            "/login",
            data={"csrf": csrf_of(form.text), "token": proxied.tokens["vera"]},
            headers={"cookie": f"ongrid_login={nonce.value}"},
        )
    cookie = SimpleCookie(set_cookies(response)["ongrid_session"])["ongrid_session"]
    assert nonce["secure"] is True
    assert response.status_code == 303
    assert cookie["secure"] is True
    assert cookie["httponly"] is True


def test_x_forwarded_proto_from_a_peer_that_is_not_listed_changes_nothing(
    console: Console,
) -> None:
    with console.http(headers={"x-forwarded-proto": "https"}) as client:
        form = client.get("/login")
        response = login_http(client, console.tokens["vera"])
    assert "secure" not in set_cookies(form)["ongrid_login"].lower()
    assert response.status_code == 303
    assert "secure" not in set_cookies(response)["ongrid_session"].lower()


def test_only_a_hash_of_the_session_id_is_stored(console: Console) -> None:
    with console.http() as client:
        response = login_http(client, console.tokens["oscar"])
        session_id = SimpleCookie(set_cookies(response)["ongrid_session"])["ongrid_session"].value
    on_disk = b"".join(
        path.read_bytes()
        for path in Path(console.settings.data_dir).iterdir()
        if path.is_file() and path.name.startswith("ongrid.db")
    )
    assert session_id.encode() not in on_disk
    assert hashlib.sha256(session_id.encode()).hexdigest().encode() in on_disk


def test_a_wrong_token_is_refused_on_the_page_and_audited_without_the_token(
    console: Console,
) -> None:
    wrong = "ogs_" + "x" * 43
    with console.http() as client:
        response = login_http(client, wrong)
        assert "ongrid_session" not in set_cookies(response)
        assert client.get("/skills").status_code == 303  # still not logged in
    assert response.status_code == 401
    assert "Invalid or revoked token." in response.text
    assert wrong not in response.text
    refused = console.store.audit.entries(limit=5, action="session.refused")
    assert refused
    assert refused[0]["actor"] == "anonymous"
    assert wrong not in str(refused)


def test_a_login_post_without_the_forms_nonce_is_refused(console: Console) -> None:
    """The login form's CSRF check: its nonce cookie and field must match (a page of another
    site cannot read the cookie, so it cannot log a victim into the attacker's account)."""
    with console.http() as client:
        client.get("/login")
        response = client.post(
            "/login", data={"csrf": "guessed", "token": console.tokens["admin"], "next": "/"}
        )
    with console.http() as fresh:  # no nonce cookie at all
        nonce = csrf_of(fresh.get("/login").text)
        fresh.cookies.clear()
        bare = fresh.post("/login", data={"csrf": nonce, "token": console.tokens["admin"]})
    assert response.status_code == 403
    assert bare.status_code == 403
    assert "ongrid_session" not in set_cookies(response)
    assert "ongrid_session" not in set_cookies(bare)


@pytest.mark.parametrize(
    ("field", "cookie"),
    [
        ("", None),  # an empty field and no nonce cookie
        (None, None),  # neither
        ("", ""),  # both empty
        ("forged-nonce", None),  # a field with no cookie to match
    ],
)
def test_a_login_post_opens_no_session_unless_its_nonce_cookie_is_there_and_matches(
    console: Console, field: str | None, cookie: str | None
) -> None:
    before = len(console.store.audit.entries(limit=1000, action="session.opened"))
    data = {"token": console.tokens["admin"], "next": "/"}
    if field is not None:
        data["csrf"] = field
    with console.http() as client:
        if cookie is not None:
            client.cookies.set("ongrid_login", cookie, path="/login")
        response = client.post("/login", data=data)
        still_out = client.get("/skills")
    assert response.status_code == 403
    assert "ongrid_session" not in set_cookies(response)
    assert still_out.status_code == 303
    assert len(console.store.audit.entries(limit=1000, action="session.opened")) == before


@pytest.mark.parametrize("origin", ["null", "http://evil.example", "https://127.0.0.1"])
def test_a_login_post_from_an_opaque_or_foreign_origin_is_refused_even_with_its_nonce(
    console: Console, origin: str
) -> None:
    with console.http() as client:
        nonce = csrf_of(client.get("/login").text)
        response = client.post(
            "/login",
            data={"csrf": nonce, "token": console.tokens["admin"], "next": "/"},
            headers={"origin": origin},
        )
    assert response.status_code == 403
    assert "ongrid_session" not in set_cookies(response)


def test_a_login_post_from_the_consoles_own_origin_opens_a_session(console: Console) -> None:
    with console.http() as client:
        nonce = csrf_of(client.get("/login").text)
        response = client.post(
            "/login",
            data={"csrf": nonce, "token": console.tokens["vera"], "next": "/"},
            headers={"origin": console.url, "sec-fetch-site": "same-origin"},
        )
    assert response.status_code == 303
    assert "ongrid_session" in set_cookies(response)


@pytest.mark.parametrize(
    ("asked", "went"),
    [
        ("/skills/host_info", "/skills/host_info"),
        ("/skills?q=disk&page=2", "/skills?q=disk&page=2"),
        ("//evil.example/x", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("/login", "/"),
        ("/skills\r\nSet-Cookie: x=1", "/"),
        ("", "/"),
    ],
)
def test_after_login_the_browser_goes_back_only_to_a_local_path(asked: str, went: str) -> None:
    assert safe_next(asked) == went


def test_logging_in_while_logged_in_goes_straight_on(console: Console) -> None:
    with console.logged_in("vera") as client:
        response = client.get("/login?next=/skills/host_info")
    assert response.status_code == 303
    assert response.headers["location"] == "/skills/host_info"


def test_logout_ends_the_session_on_the_server_so_the_old_cookie_opens_nothing(
    console: Console,
) -> None:
    with console.logged_in("olga") as client:
        old = client.cookies["ongrid_session"]
        response = client.post("/logout", data={"csrf": console.csrf(client)})
        assert response.status_code == 303
        assert response.headers["location"] == "/login?ended=1"
        assert "Max-Age=0" in set_cookies(response)["ongrid_session"]
    with console.http(cookies={"ongrid_session": old}) as replay:
        refused = replay.get("/skills")
    assert refused.status_code == 303
    assert refused.headers["location"].startswith("/login")
    closed = console.store.audit.entries(limit=5, action="session.closed")
    assert closed[0]["actor"] == "olga"
    assert closed[0]["subject"] == hashlib.sha256(old.encode()).hexdigest()[:16]


@pytest.fixture
def fresh_throttle(console: Console) -> Iterator[LoginThrottle]:
    """A throttle of this test's own, so the other tests' logins from 127.0.0.1 go on."""
    before = console.web.state.login_throttle
    console.web.state.login_throttle = LoginThrottle()
    try:
        yield console.web.state.login_throttle
    finally:
        console.web.state.login_throttle = before


def test_failed_logins_from_one_address_are_throttled_even_with_a_good_token_then(
    console: Console, fresh_throttle: LoginThrottle
) -> None:
    before = len(console.store.audit.entries(limit=1000, action="session.refused"))
    with console.http() as client:
        for _ in range(MAX_FAILURES):
            assert login_http(client, "ogs_wrong").status_code == 401
        blocked = login_http(client, console.tokens["admin"])
    after = len(console.store.audit.entries(limit=1000, action="session.refused"))
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "ongrid_session" not in set_cookies(blocked)
    assert after - before == MAX_FAILURES  # the refusals while blocked are not written


def refused_clients(console: Console) -> list[str]:
    entries = console.store.audit.entries(limit=1000, action="session.refused")
    return [entry["data"]["client"] for entry in reversed(entries)]


def test_a_loopback_client_rotating_x_forwarded_for_stays_throttled_and_audited_as_its_peer(
    console: Console, fresh_throttle: LoginThrottle
) -> None:
    before = len(refused_clients(console))
    with console.http() as client:
        answers = [
            login_http(client, "ogs_wrong", forwarded_for=f"198.51.100.{n}").status_code
            for n in range(MAX_FAILURES)
        ]
        blocked = login_http(client, console.tokens["admin"], forwarded_for="192.0.2.1")
    assert answers == [401] * MAX_FAILURES
    assert blocked.status_code == 429
    assert "ongrid_session" not in set_cookies(blocked)
    assert refused_clients(console)[before:] == ["127.0.0.1"] * MAX_FAILURES


def test_behind_a_listed_proxy_the_right_most_address_it_does_not_trust_is_the_client(
    proxied: Console,
) -> None:
    proxied.web.state.login_throttle = LoginThrottle()
    before = len(refused_clients(proxied))
    chain = "192.0.2.66, 203.0.113.7, 10.1.2.3"  # made up by the client, then the proxies'
    with proxied.http() as client:
        answers = [
            login_http(client, "ogs_wrong", forwarded_for=chain).status_code
            for _ in range(MAX_FAILURES + 1)
        ]
        other = login_http(client, proxied.tokens["vera"], forwarded_for="203.0.113.8")
    opened = proxied.store.audit.entries(limit=1, action="session.opened")
    assert answers == [401] * MAX_FAILURES + [429]
    assert other.status_code == 303  # another client behind the same proxy logs in
    assert opened[0]["data"]["client"] == "203.0.113.8"
    assert refused_clients(proxied)[before:] == ["203.0.113.7"] * MAX_FAILURES


def test_a_throttled_address_may_try_again_once_its_failures_leave_the_window() -> None:
    throttle = LoginThrottle(max_failures=3, window=60)
    for second in range(3):
        throttle.failed("10.0.0.1", now=100.0 + second)
    assert throttle.wait_seconds("10.0.0.1", now=103.0) == pytest.approx(57.0)
    assert throttle.wait_seconds("10.0.0.2", now=103.0) == 0
    assert throttle.wait_seconds("10.0.0.1", now=160.5) == 0  # the first failure left
    throttle.succeeded("10.0.0.1")
    assert throttle.wait_seconds("10.0.0.1", now=161.0) == 0
