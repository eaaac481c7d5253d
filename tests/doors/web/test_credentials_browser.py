"""Credentials in a real browser (headless Chromium): an admin creates a credential on the
credentials page, binds it on a skill's page, and the skill becomes available; the value is on
no page. The screenshots are docs/img/ui-credentials.png and ui-skill-credentials.png."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import Console, console_server, login, screenshot
from tests.support.skills import write_skill

SECRET = "tok_browser-3c7d1e55-LIVE"
SLOT = {
    "slot": "github",
    "label": "GitHub token",
    "fields": ["token"],
    "inject": {
        "env": {"GITHUB_TOKEN": "{{token}}"},
        "files": [{"path": "github/token", "content": "{{token}}", "mode": "0400"}],
    },
}


def gh_user(root: Path) -> None:
    write_skill(root, "gh_user", description="Who the GitHub token belongs to.", credentials=[SLOT])


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console"), more_skills=gh_user) as served:
        yield served


def test_an_admin_creates_a_credential_and_binds_it_and_the_skill_is_available(
    console: Console, page: Page
) -> None:
    login(page, console, "admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Credentials").click()
    expect(page.get_by_role("heading", name="Credentials", level=1)).to_be_visible()
    form = page.locator("form.create-credential")
    form.get_by_label("Credential name").fill("github-ops")
    row = form.get_by_role("group", name="Field 1")
    row.get_by_label("Field name").fill("token")
    row.get_by_label("Value", exact=True).fill(SECRET)
    form.get_by_role("button", name="Create").click()
    expect(page.locator(".credential-done")).to_contain_text("Created github-ops")
    card = page.locator("#credential-github-ops")
    expect(card).to_contain_text("token stored")
    expect(card.locator(".badge.unbound")).to_have_text("not bound")
    screenshot(page, "credentials", full_page=True)

    page.goto(console.url + "/skills/gh_user")
    slot = page.locator("#slot-github")
    expect(slot.locator(".bound")).to_have_text("nothing bound: the skill is unavailable")
    expect(page.locator(".page-head .badge.unavailable")).to_be_visible()
    slot.get_by_label("Credential").select_option("github-ops")
    slot.get_by_role("button", name="Bind").click()

    expect(slot.locator(".bound")).to_contain_text("github-ops (this skill's own binding)")
    expect(page.locator(".page-head .badge.available")).to_have_text("available")
    expect(page.get_by_text("unavailable")).to_have_count(0)
    screenshot(page, "skill-credentials", full_page=True)
    assert console.manager.registry.get("gh_user").available
    assert SECRET not in page.content()
    page.goto(console.url + "/credentials")
    expect(page.locator("#credential-github-ops")).to_contain_text("skill gh_user, slot github")
    assert SECRET not in page.content()
