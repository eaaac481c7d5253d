"""The hosts pages without a fleet, over plain HTTP: readable by every role, they say plainly that
no fleet is configured and how to set one up, never an error."""

from __future__ import annotations

import pytest

from ongrid_skills.doors.web.templates import NAV
from tests.support.browser import Console


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


def test_the_hosts_pages_and_their_stream_need_a_session(console: Console) -> None:
    with console.http() as client:
        for path in ("/hosts", "/hosts/web-1"):
            answer = client.get(path)
            assert answer.status_code == 303 and "/login" in answer.headers["location"]
        assert client.get("/hosts/events").status_code in (303, 401)


def test_hosts_is_in_the_navigation_after_executions() -> None:
    sections = [item.section for item in NAV]
    assert sections.index("hosts") == sections.index("executions") + 1
