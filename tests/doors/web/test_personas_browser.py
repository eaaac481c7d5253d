"""The persona editor in a real browser (headless Chromium): an admin creates a persona with a
preview of its tools, edits it and deletes it, with the keyboard and clicks only, at 1280×800
and at a phone's width, the console clean (no CSP violation, no console error)."""

from __future__ import annotations

from playwright.sync_api import Browser, Page, expect

from tests.support.browser import PHONE, Console, PageGuard, login, screenshot, watched_page


def test_an_admin_creates_previews_edits_and_deletes_a_persona(
    console: Console, page: Page, page_guard: PageGuard
) -> None:
    page_guard.expect("status of 400")  # the refused save below answers 400, as REST does
    login(page, console, "admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Personas").click()
    page.get_by_role("link", name="New persona").click()
    expect(page.get_by_role("heading", name="New persona", level=1)).to_be_visible()
    page.get_by_label("Name").fill("night_watch")
    page.get_by_label("Description").fill("Watches <b>the night</b>.")
    page.get_by_label("When to use").fill("At night.")
    page.get_by_label("Tools (whitelist)").fill("host_info\nport_*")
    page.get_by_label("System prompt (Markdown)").fill("# Night\nYou watch.")
    page.get_by_role("button", name="Preview the tools").click()
    preview = page.locator(".persona-preview")
    expect(preview.get_by_role("heading")).to_have_text("Offered now (2)")
    expect(preview.locator("li")).to_have_text(["host_info safe", "port_check safe"])
    screenshot(page, "persona-editor", full_page=True)
    page.get_by_role("button", name="Create").click()

    expect(page.get_by_role("heading", name="night_watch", level=1)).to_be_visible()
    expect(page.locator(".lead")).to_have_text("Watches <b>the night</b>.")
    assert console.manager.registry.persona("night_watch").prompt == "# Night\nYou watch.\n"
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Permission mode").select_option("mutating-with-confirm")
    page.get_by_label("Disallowed tools").fill("a*b")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#persona-disallowed_tools-error")).to_contain_text("prefix* or *suffix")
    page.get_by_label("Disallowed tools").fill("port_*")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="night_watch", level=1)).to_be_visible()
    saved = console.manager.registry.persona("night_watch")
    assert (saved.permission_mode.value, saved.disallowed_tools) == (
        "mutating-with-confirm",
        ("port_*",),
    )

    page.get_by_role("link", name="Delete").click()
    page.get_by_role("button", name="Delete night_watch").click()
    expect(page.get_by_role("heading", name="Personas", level=1)).to_be_visible()
    expect(page.get_by_role("link", name="night_watch")).to_have_count(0)
    assert "night_watch" not in console.manager.registry.personas


def test_the_editor_fits_a_phone_screen(console: Console, browser: Browser) -> None:
    guard = PageGuard()
    phone = watched_page(browser, guard, viewport=PHONE)
    try:
        login(phone, console, "admin")
        phone.goto(console.url + "/personas/new")
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], width
        phone.goto(console.url + "/personas")
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        phone.context.close()
    assert not guard.unexpected(), guard.unexpected()
