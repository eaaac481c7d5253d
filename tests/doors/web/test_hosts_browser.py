"""The hosts pages in headless Chromium, with a real NATS server and real worker processes: the
list follows hosts going offline (kill -9) and coming back without a reload; a host's page shows
its skills' definitions (one that differs between hosts flagged) and the calls handed to it; a
host skill's page links the hosts that offer it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import (
    DESKTOP,
    PHONE,
    Console,
    console_server,
    login,
    screenshot,
)
from tests.support.fleet import TTL, Fleet, host_skill
from tests.support.waiting import wait_for

#: How long the page may take to show a host offline after its worker was killed: the TTL
#: (the manager's verdict), its tick, and the way to the browser, with room for a loaded machine.
OFFLINE_WITHIN_MS = (TTL * 4 + 10) * 1000


@pytest.fixture
def worker_skills(tmp_path: Path) -> Path:
    root = tmp_path / "worker-skills"
    host_skill(root, "where_am_i", 'echo "{\\"args\\": $ARGS}"', description="Says where it ran.")
    host_skill(root, "disk_report", "echo '{\"used\": 1}'", description="Reports disk use.")
    return root


@pytest.fixture
def fleet_console(fleet: Fleet, tmp_path: Path) -> Iterator[Console]:
    """The served console (REST, MCP, web) as the fleet's manager."""
    base = tmp_path / "console"
    base.mkdir()
    with console_server(
        base,
        data_dir=fleet.settings.data_dir,
        nats_url=fleet.nats.url,
        fleet_prefix=fleet.prefix,
        fleet_ttl_seconds=TTL,
        fleet_worker_keys=str(fleet.worker_keys),
    ) as served:
        yield served


def online_hosts(console: Console) -> list[str]:
    items = console.rest("GET", "/v1/hosts", "vera").json()["items"]
    return [h["host"] for h in items if h["online"]]


def row(page: Page, host: str) -> object:
    return page.locator(f'table.hosts tr[data-host="{host}"]')


def test_the_hosts_page_follows_a_worker_killed_and_started_again_without_a_reload(
    fleet: Fleet, worker_skills: Path, fleet_console: Console, page: Page
) -> None:
    fleet.worker("alpha", worker_skills, "env=prod", "rack=r1")
    beta = fleet.worker("beta", worker_skills, "env=staging")
    wait_for(lambda: online_hosts(fleet_console) == ["alpha", "beta"], "both hosts online")
    login(page, fleet_console, "vera")  # a viewer reads it, as every token reads GET /v1/hosts
    page.get_by_role("link", name="Hosts").click()
    page.wait_for_url(fleet_console.url + "/hosts")
    for host in ("alpha", "beta"):
        expect(row(page, host)).to_contain_text("online")  # in words, not only in colour
        expect(row(page, host)).to_contain_text("2")  # its two skills
    expect(row(page, "alpha")).to_contain_text("env=prod")
    expect(row(page, "alpha")).to_contain_text("rack=r1")
    expect(row(page, "alpha")).to_contain_text(" ago")
    expect(row(page, "alpha")).to_contain_text(" UTC")
    page.set_viewport_size(PHONE)  # a narrow phone: the rows stack, nothing scrolls sideways
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    expect(row(page, "alpha")).to_contain_text("online")
    page.set_viewport_size(DESKTOP)
    screenshot(page, "ui-hosts")
    page.evaluate("window.notReloaded = true")

    beta.stop(signal.SIGKILL)  # no goodbye: offline once its heartbeat is missed for the TTL
    beta_row = page.locator('table.hosts tr[data-host="beta"][data-online="no"]')
    expect(beta_row).to_contain_text("offline", timeout=OFFLINE_WITHIN_MS)
    expect(page.locator(".live-state")).to_contain_text("beta is offline")
    expect(row(page, "alpha")).to_contain_text("online")
    screenshot(page, "ui-hosts-offline")
    with fleet_console.logged_in("vera") as client:  # and the home lists it as offline
        home = client.get("/").text
    assert '<a href="/hosts/beta"><code>beta</code></a> <span class="status host-offline">' in home
    assert 'href="/hosts/alpha"' not in home

    fleet.worker("beta", worker_skills, "env=staging")
    back = page.locator('table.hosts tr[data-host="beta"][data-online="yes"]')
    expect(back).to_contain_text("online", timeout=OFFLINE_WITHIN_MS)
    expect(page.locator(".live-state")).to_contain_text("beta is online")
    assert page.evaluate("window.notReloaded") is True


def test_a_hosts_page_shows_its_skills_definitions_and_the_calls_handed_to_it(
    fleet: Fleet, worker_skills: Path, tmp_path: Path, fleet_console: Console, page: Page
) -> None:
    other = tmp_path / "beta-skills"  # beta's disk_report is another definition
    host_skill(other, "where_am_i", 'echo "{\\"args\\": $ARGS}"', description="Says where it ran.")
    host_skill(other, "disk_report", "echo '{\"used\": 2}'", description="Reports disk use.")
    fleet.worker("alpha", worker_skills)
    fleet.worker("beta", other)
    wait_for(lambda: online_hosts(fleet_console) == ["alpha", "beta"], "both hosts online")
    answer = fleet_console.rest(
        "POST", "/v1/skills/where_am_i/execute", "olga", json={"args": {"host": "alpha"}}
    )
    assert answer.json()["status"] == "succeeded", answer.text
    call_id = answer.json()["id"]

    login(page, fleet_console, "vera")
    page.goto(fleet_console.url + "/skills/where_am_i")
    offers = page.locator("ul.offers")
    expect(offers).to_contain_text("alpha (online)")
    expect(offers).to_contain_text("beta (online)")
    page.locator("ul.offers").get_by_role("link", name="alpha").click()
    page.wait_for_url(fleet_console.url + "/hosts/alpha")

    expect(page.locator("h1")).to_have_text("alpha")
    same = page.locator('tr[data-skill="where_am_i"]')
    expect(same).to_contain_text("the same definition on every host")
    differs = page.locator('tr[data-skill="disk_report"]')
    expect(differs).to_contain_text("differs between hosts")
    expect(differs.get_by_role("link", name="beta")).to_be_visible()
    screenshot(page, "ui-host", full_page=True)
    page.get_by_role("link", name=call_id[:12]).click()
    page.wait_for_url(fleet_console.url + f"/executions/{call_id}")
    expect(page.locator("body")).to_contain_text("succeeded")

    page.goto(fleet_console.url + "/skills/disk_report")  # two definitions: shown, not merged
    expect(page.locator("main")).to_contain_text("differs between hosts")
    assert page.locator("ul.offers > li").count() == 2

    with fleet_console.logged_in("vera") as client:
        assert call_id in client.get("/executions?host=alpha").text
        assert call_id not in client.get("/executions?host=beta").text
        unknown = client.get("/hosts/%3Cb%3Enowhere%3C%2Fb%3E")
    assert unknown.status_code == 404 and "<b>nowhere" not in unknown.text


def test_a_worker_whose_key_is_not_trusted_is_shown_unverified_with_the_reason(
    fleet: Fleet, worker_skills: Path, fleet_console: Console, page: Page
) -> None:
    fleet.worker("alpha", worker_skills)
    fleet.worker("stranger", worker_skills, trusted=False)
    wait_for(lambda: online_hosts(fleet_console) == ["alpha"], "alpha online")
    login(page, fleet_console, "vera")
    page.goto(fleet_console.url + "/hosts")
    expect(row(page, "stranger")).to_contain_text("unverified")
    expect(row(page, "stranger")).to_contain_text(
        "no key is trusted for host stranger in ONGRID_FLEET_WORKER_KEYS"
    )
    expect(row(page, "stranger")).to_contain_text("its skills are not offered")
    expect(row(page, "alpha")).to_contain_text("online")
    page.goto(fleet_console.url + "/hosts/stranger")
    expect(page.locator("dl.facts")).to_contain_text("not verified: no key is trusted")
    offered = fleet_console.rest("GET", "/v1/skills/where_am_i", "vera").json()
    assert offered["schema"]["properties"]["host"]["enum"] == ["alpha"]
