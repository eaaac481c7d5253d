"""The console in a real browser (headless Chromium): login and logout, the catalogue's search
and filters, the rules of a viewer, forged cross-site posts, live parts, the keyboard, a phone's
width, and a clean console (no error, no CSP violation) on every page. Screenshots of the main
pages go to tests/.screenshots/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import (
    PHONE,
    Console,
    PageGuard,
    login,
    screenshot,
    watched_page,
)
from tests.support.http import QuietHandler, serve


def reloads(console: Console) -> int:
    return len(console.store.audit.entries(limit=1000, action="registry.reloaded"))


def test_login_and_logout_in_a_browser(console: Console, page: Page) -> None:
    page.goto(console.url + "/")
    expect(page).to_have_url(console.url + "/login?next=/")
    screenshot(page, "login")
    login(page, console, "olga")
    expect(page.locator(".who-name")).to_have_text("olga")
    [cookie] = [c for c in page.context.cookies() if c["name"] == "ongrid_session"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["secure"] is False  # plain HTTP on loopback
    assert cookie["path"] == "/"
    assert "ongrid_session" not in page.evaluate("document.cookie")
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert console.tokens["olga"] not in page.content()

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(console.url + "/login?ended=1")
    expect(page.get_by_role("status")).to_have_text("You are logged out.")
    with console.http(cookies={"ongrid_session": cookie["value"]}) as replay:
        assert replay.get("/skills").status_code == 303  # refused by the server itself
    page.context.add_cookies([{**cookie}])  # put the old cookie back in the browser
    page.goto(console.url + "/skills")
    expect(page).to_have_url(console.url + "/login?next=/skills")


def test_searching_and_filtering_the_catalogue_in_a_browser(console: Console, page: Page) -> None:
    login(page, console, "vera")
    screenshot(page, "catalogue")
    page.get_by_label("Search").fill("port check")
    page.get_by_label("Search").press("Enter")
    expect(page).to_have_url(re.compile(r"/skills\?q=port\+check&"))
    names = page.locator(".skill-name").all_inner_texts()
    hits = console.manager.registry.search_index().search("port check", 50)
    assert names == [skill.name for skill, _score in hits]
    screenshot(page, "catalogue-search")

    page.goto(console.url + "/skills")
    page.get_by_label("Class").select_option("mutating")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator(".skill .badge.class-mutating")).to_have_count(2)
    expect(page.locator(".skill .badge.class-safe")).to_have_count(0)
    page.get_by_label("Class").select_option("")
    page.get_by_label("Offered to persona").select_option("reader")
    page.get_by_role("button", name="Apply").click()
    assert sorted(page.locator(".skill-name").all_inner_texts()) == [
        "host_info",
        "log_grep",
        "port_check",
    ]
    page.get_by_role("link", name="Clear").click()
    expect(page).to_have_url(console.url + "/skills")


def test_a_viewer_session_cannot_reload_as_a_viewer_token_cannot(
    console: Console, page: Page, page_guard: PageGuard
) -> None:
    page_guard.expect("status of 403")
    login(page, console, "vera")
    expect(page.get_by_role("button", name="Reload skills")).to_have_count(0)
    before = reloads(console)
    # The button is not there; the server refuses the post anyway, with a valid CSRF token.
    status = page.evaluate(
        """() => fetch("/reload", {
            method: "POST",
            headers: {"content-type": "application/x-www-form-urlencoded"},
            body: "csrf=" + encodeURIComponent(document.querySelector("input[name=csrf]").value),
        }).then((response) => response.status)"""
    )
    assert status == 403
    assert console.rest("POST", "/v1/reload", "vera").status_code == 403
    assert reloads(console) == before


def test_an_admin_reloads_from_the_catalogue(console: Console, page: Page) -> None:
    login(page, console, "admin")
    before = reloads(console)
    page.get_by_role("button", name="Reload skills").click()
    expect(page.get_by_role("status").first).to_contain_text("Reloaded:")
    assert reloads(console) == before + 1


class Attacker(QuietHandler):
    """Another site's page that posts a form to the console as soon as it loads."""

    target = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><title>win a prize</title>
<form id="f" method="post" action="{self.target}/reload">
<input type="hidden" name="csrf" value="forged"></form>
<script>document.getElementById("f").submit();</script>""".encode()
        self.send_body(200, body, "text/html; charset=utf-8")


@pytest.fixture
def attacker(console: Console) -> Iterator[int]:
    Attacker.target = console.url
    with serve(Attacker) as server:
        yield server.server_address[1]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])  # another site; another port
def test_a_forged_cross_site_post_is_refused(
    console: Console, page: Page, page_guard: PageGuard, attacker: int, host: str
) -> None:
    page_guard.expect("status of 403")
    login(page, console, "admin")
    before = reloads(console)
    page.goto(f"http://{host}:{attacker}/")
    page.wait_for_url(console.url + "/reload")
    assert "403 Forbidden" in page.content()
    assert reloads(console) == before


def test_the_console_watch_catches_a_content_security_policy_violation(
    console: Console, browser: Browser
) -> None:
    """The guard that fails every other browser test is not blind: an inline style set on a
    page of ours is refused by the policy and reported."""
    guard = PageGuard()
    page = watched_page(browser, guard)
    try:
        page.goto(console.url + "/login")
        with page.expect_console_message(lambda message: "CSP violation" in message.text):
            page.evaluate("document.body.setAttribute('style', 'background: red')")
    finally:
        page.context.close()
    assert guard.violations(), guard.problems


def test_a_running_execution_turns_succeeded_on_the_skill_page_without_a_reload(
    console: Console, page: Page, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    started = console.rest(
        "POST",
        "/v1/skills/gated_wait/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    )
    execution_id = started.json()["id"]
    login(page, console, "vera")
    page.goto(console.url + "/skills/gated_wait")
    row = page.locator(f"tr:has(code:text-is('{execution_id}'))")
    expect(row.locator(".status")).to_have_text("running")
    expect(row).to_have_attribute("data-part", "execution-status")
    screenshot(page, "skill-running", full_page=True)
    gate.touch()
    expect(row.locator(".status")).to_have_text("succeeded", timeout=20_000)
    expect(row.locator(".status")).to_have_class("status status-succeeded")
    screenshot(page, "skill")


def test_the_keyboard_reaches_everything_with_a_visible_focus(console: Console, page: Page) -> None:
    page.goto(console.url + "/login?next=/skills")
    # autofocus is applied at the next rendering step, which may come after the load event
    expect(page.locator("#token")).to_be_focused()  # focused on arrival
    page.keyboard.type(console.tokens["vera"])
    page.keyboard.press("Enter")
    page.wait_for_url(console.url + "/skills")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    box = page.locator(".skip-link").bounding_box()
    assert box is not None and box["y"] >= 0  # shown while focused
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "q":
            break
    else:
        pytest.fail("the search field is not reachable with Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.type("disk")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/skills\?q=disk&"))


def test_pages_fit_a_phone_screen_without_sideways_scrolling(
    console: Console, browser: Browser
) -> None:
    guard = PageGuard()
    page = watched_page(browser, guard, viewport=PHONE)
    try:
        page.goto(console.url + "/login")
        widths = {"login": page.evaluate("document.documentElement.scrollWidth")}
        login(page, console, "admin")
        widths["catalogue"] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-catalogue")
        page.goto(console.url + "/skills/disk_cleaner")
        widths["skill"] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-skill", full_page=True)
    finally:
        page.context.close()
    assert widths == {"login": PHONE["width"], "catalogue": PHONE["width"], "skill": PHONE["width"]}
    assert not guard.unexpected(), guard.problems


def test_the_console_loads_nothing_from_another_origin(console: Console, page: Page) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    login(page, console, "admin")
    page.goto(console.url + "/skills/disk_cleaner")
    assert requested
    assert all(url.startswith(console.url + "/") for url in requested), requested
    sheets = [link.get_attribute("href") for link in page.locator("link[rel=stylesheet]").all()]
    assert sheets
    with httpx.Client() as client:
        for href in sheets:
            css = client.get(console.url + str(href))
            assert css.status_code == 200
            assert "http" not in css.text  # no @import or url() of another origin
