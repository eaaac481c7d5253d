"""The hosts pages without a fleet, over plain HTTP: readable by every role, they say plainly that
no fleet is configured and how to set one up, never an error."""

from __future__ import annotations

import pytest

from ongrid_skills.doors.web import hosts
from ongrid_skills.doors.web.templates import NAV
from tests.support.browser import Console
from tests.support.sse import read_sse

SSE = {"accept": "text/event-stream"}


@pytest.mark.parametrize("who", ["vera", "olga", "admin"])
def test_without_a_fleet_the_hosts_page_says_so_and_how_to_set_one_up(
    console: Console, who: str
) -> None:
    with console.logged_in(who) as client:
        page = client.get("/hosts")
    assert page.status_code == 200
    assert "No fleet is configured" in page.text
    assert "ONGRID_NATS_URL" in page.text and "docs/fleet.md" in page.text
    assert "ongrid-skills worker" in page.text
    assert '<a href="/hosts" aria-current="page">Hosts</a>' in page.text
    assert 'data-part="hosts-live"' not in page.text  # nothing to follow


def test_without_a_fleet_a_hosts_page_says_the_same_and_the_rest_route_agrees(
    console: Console,
) -> None:
    with console.logged_in("vera") as client:
        page = client.get("/hosts/web-1")
    assert page.status_code == 200 and "No fleet is configured" in page.text
    assert console.rest("GET", "/v1/hosts", "vera").json() == {
        "items": [],
        "total": 0,
        "fleet": None,
    }


def test_the_hosts_pages_send_a_visitor_without_a_session_to_the_login(console: Console) -> None:
    with console.http() as client:
        for path in ("/hosts", "/hosts/web-1"):
            answer = client.get(path)
            assert answer.status_code == 303 and "/login" in answer.headers["location"]


def test_hosts_is_in_the_navigation_after_executions() -> None:
    sections = [item.section for item in NAV]
    assert sections.index("hosts") == sections.index("executions") + 1


def test_the_hosts_stream_sends_the_table_then_ends_once_its_session_is_logged_out(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosts, "CHECK_SECONDS", 0.05)
    with console.logged_in("vera") as client:
        csrf = console.csrf(client, "/hosts")
        with client.stream("GET", "/hosts/events", headers=SSE, timeout=30) as response:
            events = read_sse(response)
            first = next(events)
            assert first.event == "hosts"
            assert first.json()["hosts"] == {} and "No host has announced" in first.json()["html"]
            assert client.post("/logout", data={"csrf": csrf}).status_code == 303
            rest = [e.event for e in events]
    assert rest == ["end"]  # an unchanged table is not sent again


def test_the_hosts_stream_is_refused_without_a_session(console: Console) -> None:
    with console.http() as anonymous:
        refused = anonymous.get("/hosts/events", headers=SSE)
    assert refused.status_code == 401
