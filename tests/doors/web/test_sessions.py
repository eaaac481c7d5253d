"""Sessions over HTTP: hostile cookies, expiry (absolute and idle), a revoked token, and the
role a session acts with (always its token's, read at each request)."""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import update

from ongrid_skills.store.models import WebSessionRow
from ongrid_skills.store.sessions import hash_session_id
from ongrid_skills.types import Role
from tests.support.browser import Console


def age(console: Console, session_id: str, **values: float) -> None:
    """Move a session's times (what waiting hours would do, without waiting)."""
    table = WebSessionRow.__table__
    with console.store.tx() as conn:
        conn.execute(
            update(table).where(table.c.id_hash == hash_session_id(session_id)).values(**values)
        )


def refused(console: Console, session_id: str) -> bool:
    with console.http(cookies={"ongrid_session": session_id}) as client:
        response = client.get("/skills")
    if response.status_code != 303:
        return False
    assert response.headers["location"] == "/login?next=/skills"
    assert "ongrid_session=" in response.headers["set-cookie"]  # the stale cookie is cleared
    return True


@pytest.mark.parametrize(
    "cookie",
    [
        "x",
        "A" * 43,  # the right shape, no such session
        "../../../etc/passwd",
        "' OR 1=1 --",
        "%00%00",
        "ä" * 43,
        "A" * 4000,
    ],
)
def test_a_garbage_session_cookie_gets_the_login_page(console: Console, cookie: str) -> None:
    with console.http() as client:
        raw = f"ongrid_session={cookie}".encode()  # as bytes: non-ASCII goes as UTF-8
        response = client.get("/skills", headers={"cookie": raw})
    assert response.status_code == 303
    assert response.headers["location"].startswith("/login")


def test_a_huge_cookie_header_is_refused_and_the_server_goes_on(console: Console) -> None:
    with console.http() as client:
        big = client.get("/skills", headers={"cookie": "ongrid_session=" + "A" * 60_000})
    with console.http() as client:
        try:
            huge = client.get("/skills", headers={"cookie": "ongrid_session=" + "A" * 2**20})
            status = huge.status_code
        except httpx.TransportError:  # the server hung up on the request head
            status = 400
    with console.logged_in("vera") as client:
        after = client.get("/skills")
    assert big.status_code == 303  # parsed, and no session
    assert 400 <= status < 500
    assert after.status_code == 200


def test_a_session_past_its_absolute_expiry_is_refused(console: Console) -> None:
    with console.logged_in("vera") as client:
        session_id = client.cookies["ongrid_session"]
    assert not refused(console, session_id)
    age(console, session_id, expires_at=time.time() - 1)
    assert refused(console, session_id)


def test_a_session_idle_for_longer_than_the_idle_limit_is_refused(console: Console) -> None:
    idle = console.settings.web_session_idle_seconds
    with console.logged_in("vera") as client:
        session_id = client.cookies["ongrid_session"]
    age(console, session_id, seen_at=time.time() - idle + 120)
    assert not refused(console, session_id)  # and seeing it refreshed seen_at
    age(console, session_id, seen_at=time.time() - idle - 1)
    assert refused(console, session_id)


def test_a_used_session_stays_open_past_the_idle_limit_counted_from_login(
    console: Console,
) -> None:
    idle = console.settings.web_session_idle_seconds
    with console.logged_in("vera") as client:
        session_id = client.cookies["ongrid_session"]
    age(console, session_id, created_at=time.time() - 2 * idle, seen_at=time.time() - 120)
    assert not refused(console, session_id)


def test_revoking_the_token_ends_the_sessions_opened_with_it(console: Console) -> None:
    token, info = console.store.tokens.create("rita", Role.OPERATOR)
    console.tokens["rita"] = token
    with console.logged_in("rita") as client:
        session_id = client.cookies["ongrid_session"]
    assert not refused(console, session_id)
    console.store.tokens.revoke(info.id)
    assert refused(console, session_id)


def test_the_console_shows_the_role_of_the_token_the_session_was_opened_with(
    console: Console,
) -> None:
    with console.logged_in("vera") as viewer, console.logged_in("admin") as admin:
        viewer_page = viewer.get("/skills").text
        admin_page = admin.get("/skills").text
    assert 'class="role role-viewer">viewer<' in viewer_page
    assert 'class="role role-admin">admin<' in admin_page
