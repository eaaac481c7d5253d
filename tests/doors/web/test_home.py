"""The console's home and the catalogue's table view, over HTTP and in headless Chromium: what
needs the person logged in (approvals they may sign with the time left, running calls, recent
failures, files that did not load with their code and reason, unavailable skills, the audit
chain), and the table view remembered per principal on the server. One served console for the
module, with a broken manifest, a skill that always fails and an unavailable SKILL.md."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import (
    DESKTOP,
    PHONE,
    Console,
    PageGuard,
    console_server,
    login,
    screenshot,
    watched_page,
)
from tests.support.skills import write_skill, write_skill_md

FAILING = "#!/bin/sh\necho 'disk is on fire' >&2\nexit 3\n"


def more_skills(skills: Path) -> None:
    write_skill(skills, "always_fails", FAILING, description="Fails, every time.")
    broken = skills / "broken"
    broken.mkdir()
    (broken / "skill.json").write_text('{"name": "broken",\n "entry": }')
    native = skills.parent / "native"
    front = {
        "name": "needs_tool",
        "description": "Instructions that need a tool this host lacks.",
        "metadata": {"requires": {"bins": ["ongrid-no-such-tool"]}},
    }
    write_skill_md(native, "needs-tool", front)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    base = tmp_path_factory.mktemp("home")
    native = (str(base / "native"),)  # with the bundled SKILL.md tools and the model's tools
    with console_server(
        base, more_skills=more_skills, native_dirs=native, bundled_skills=True
    ) as c:
        yield c


@pytest.fixture(scope="module")
def activity(
    console: Console, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A request waiting for a signature (olga's), a call running, and a call that failed."""
    asked = console.rest(
        "POST",
        "/v1/skills/restart_cache/execute",
        "olga",
        json={"args": {}, "persona": "responder"},
    )
    assert asked.status_code == 202, asked.text
    gate = tmp_path_factory.mktemp("gate") / "open"
    running = console.rest(
        "POST",
        "/v1/skills/gated_wait/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    )
    failed = console.rest("POST", "/v1/skills/always_fails/execute", "olga", json={"args": {}})
    assert failed.json()["status"] == "failed", failed.text
    try:
        yield {"approval": asked.json(), "running": running.json(), "failed": failed.json()}
    finally:
        gate.touch()


def section(page_html: str, heading_id: str) -> str:
    """The text of the home's section whose heading has ``heading_id``."""
    start = page_html.index(f'id="{heading_id}"')
    end = page_html.find("<section", start)
    return page_html[start : end if end != -1 else len(page_html)]


# ---- over HTTP ------------------------------------------------------------------------------
def test_the_home_lists_what_needs_each_principal_and_what_they_may_see(
    console: Console, activity: dict[str, Any]
) -> None:
    with console.logged_in("oscar") as oscar, console.logged_in("olga") as olga:
        theirs = oscar.get("/").text
        own = olga.get("/").text
    approval = activity["approval"]["approval_id"]
    assert f'href="/approvals/{approval}"' in section(theirs, "to-sign")  # oscar may sign it
    assert f'href="/approvals/{approval}"' not in section(own, "to-sign")  # not one's own
    assert "1 other pending request" in section(own, "to-sign")
    assert f'href="/executions/{activity["running"]["id"]}"' in section(theirs, "running")
    failures = section(theirs, "failures")
    assert f'href="/executions/{activity["failed"]["id"]}"' in failures
    # Not an admin: how many files failed, never their paths (GET /v1/loader is for admins).
    problems = section(theirs, "load-problems-title")
    assert "1 file failed to load" in problems
    assert "broken/skill.json" not in theirs
    assert "needs_tool" in problems and "ongrid-no-such-tool" in problems
    assert "Intact:" in section(theirs, "audit-state")
    assert "No fleet" in section(theirs, "offline")


def test_an_admin_sees_each_file_that_did_not_load_with_its_code_and_reason(
    console: Console,
) -> None:
    with console.logged_in("admin") as admin:
        home = admin.get("/").text
        reloaded = admin.post("/reload", data={"csrf": console.csrf(admin)})
        catalogue = admin.get(reloaded.headers["location"]).text
    problems = section(home, "load-problems-title")
    broken = console.settings.external_dirs[-1] + "/broken/skill.json"
    row = re.search(rf"<code>{re.escape(broken)}</code>.*?</tr>", problems, re.S)
    assert row, problems
    assert '<code class="load-code">parse_error</code>' in row.group(0)
    assert "line 2" in row.group(0)
    # After a reload from the catalogue, the notice says how many did not load, and where.
    assert "1 file failed to load" in catalogue
    assert 'href="/#load-problems"' in catalogue


def test_the_view_of_the_catalogue_is_the_principals_choice_kept_on_the_server(
    console: Console,
) -> None:
    with console.logged_in("vera") as vera:
        chosen = vera.post(
            "/preferences/catalogue-view",
            data={"csrf": console.csrf(vera), "view": "table", "back": "q=disk&class=safe"},
        )
        table = vera.get("/skills").text
        refused = vera.post(
            "/preferences/catalogue-view", data={"csrf": console.csrf(vera), "view": "grid"}
        )
    with console.logged_in("vera") as again, console.logged_in("olga") as olga:
        still = again.get("/skills").text  # another session of the same principal
        others = olga.get("/skills").text
    assert chosen.status_code == 303
    assert chosen.headers["location"] == "/skills?q=disk&class=safe"
    assert '<table class="catalogue-table">' in table and '<table class="catalogue-table">' in still
    assert '<table class="catalogue-table">' not in others
    assert refused.status_code == 400
    assert console.store.preferences.get("vera", "catalogue.view") == "table"


# ---- in a browser ---------------------------------------------------------------------------
def test_login_lands_on_the_home_which_works_with_a_keyboard_and_on_a_phone(
    console: Console, activity: dict[str, Any], page: Page
) -> None:
    page.goto(console.url + "/login")
    page.fill("#token", console.tokens["admin"])
    page.press("#token", "Enter")
    page.wait_for_url(console.url + "/")
    expect(page.get_by_role("heading", name="Home", level=1)).to_be_visible()
    nav = page.get_by_role("navigation", name="Main").get_by_role("link", name="Home")
    expect(nav).to_have_attribute("aria-current", "page")
    to_sign = page.locator("li.to-sign")
    expect(to_sign).to_have_count(1)
    expect(to_sign).to_contain_text("restart_cache")
    expect(to_sign.locator(".time-left")).to_have_text(re.compile(r"^\d+ (h|min).* left$"))
    failure = page.locator("section:has(#failures) li").first
    expect(failure).to_contain_text("always_fails")
    expect(failure).to_contain_text("failed")
    expect(page.locator("code.load-code").first).to_have_text("parse_error")
    expect(page.locator("section:has(#audit-state)")).to_contain_text("Intact")

    page.keyboard.press("Tab")  # the skip link, then into the page: the first request is reached
    page.keyboard.press("Enter")
    for _ in range(30):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.closest('li.to-sign') !== null"):
            break
    else:
        pytest.fail("the approval to sign is not reachable with Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/approvals/[0-9a-f]+$"))
    page.go_back()

    screenshot(page, "ui-home", full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") == PHONE["width"]
    screenshot(page, "phone-home", full_page=True)


def test_the_table_view_is_chosen_once_and_follows_the_principal_to_another_browser(
    console: Console, activity: dict[str, Any], browser: Browser, page: Page
) -> None:
    login(page, console, "olga")
    expect(page.locator(".badge.available")).to_have_count(0)  # only where it is unavailable
    expect(page.locator("#category option", has_text="native")).to_have_count(0)
    expect(page.locator(".skill-name", has_text="search_skills")).to_have_count(0)
    page.get_by_role("button", name="Table").click()
    table = page.locator("table.catalogue-table")
    expect(table).to_be_visible()
    headers = table.locator("thead th").all_inner_texts()
    assert headers == ["Name", "Class", "Category", "Source", "Availability", "Last run"]
    expect(page.get_by_role("button", name="Table")).to_have_attribute("aria-pressed", "true")
    fails = table.locator("tr", has=page.locator("a.skill-name", has_text="always_fails"))
    expect(fails.locator("td").last).to_contain_text("failed")
    unavailable = table.locator("tr", has=page.locator("a.skill-name", has_text="needs_tool"))
    expect(unavailable).to_contain_text("unavailable")
    expect(unavailable.locator("td").nth(1)).to_have_text("—")  # "instructions" is no category
    page.get_by_role("link", name=re.compile(r"Show the model's \d catalogue tools")).click()
    expect(page.locator("a.skill-name", has_text="search_skills")).to_have_count(1)
    page.goto(console.url + "/skills")
    screenshot(page, "ui-catalogue-table", height=640)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") == PHONE["width"]
    screenshot(page, "phone-catalogue-table", full_page=True)
    page.set_viewport_size(DESKTOP)

    guard = PageGuard()
    elsewhere = watched_page(browser, guard)  # a new browser context: no shared storage
    try:
        login(elsewhere, console, "olga")
        expect(elsewhere.locator("table.catalogue-table")).to_be_visible()
        elsewhere.get_by_role("button", name="Table").focus()
        elsewhere.keyboard.press("Shift+Tab")  # the other choice, with the keyboard
        expect(elsewhere.get_by_role("button", name="Cards")).to_be_focused()
        elsewhere.keyboard.press("Enter")
        expect(elsewhere.locator("ul.skills").first).to_be_visible()
    finally:
        elsewhere.context.close()
    assert not guard.unexpected(), guard.problems
    assert console.store.preferences.get("olga", "catalogue.view") == "cards"


def test_the_homes_audit_verdict_is_the_newest_one_made_in_the_console(console: Console) -> None:
    entries = re.compile(r"<strong>Intact:</strong> (\d+) entries checked")
    with console.logged_in("vera") as vera:
        first = entries.search(vera.get("/").text)
        console.rest("POST", "/v1/reload", "admin")  # one more entry in the chain
        again = entries.search(vera.get("/").text)
        assert first and again and again.group(1) == first.group(1)  # kept, not verified again
        vera.post("/audit/verify", data={"csrf": console.csrf(vera)})
        after = entries.search(vera.get("/").text)
    assert after and int(after.group(1)) > int(first.group(1))
