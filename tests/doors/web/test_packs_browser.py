"""The packs page in a real browser (headless Chromium): install the example pack from its
index through its review (the capability summary) and Confirm, choose a version, upgrade, roll
back at once from the notice and remove through the confirmation page, upload a signed archive
and a hostile one, a viewer without the page, a forged post. Every change is
checked in the registry and the audit, not only on the page. The screenshot of the page is
docs/img/ui-packs.png."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.keys import load_signing_key
from ongrid_skills.packs.trust import sign_path
from tests.support.browser import (
    PHONE,
    Console,
    PageGuard,
    console_server,
    login,
    screenshot,
    watched_page,
)
from tests.support.packs import (
    EXAMPLE_PACKS,
    Entry,
    Market,
    signed_market,
    tar_gz,
    tree,
    write_pack,
)

EXAMPLE_SIGNER = "SHA256:DR1lLNQkCV8vg9WfRltvV75Ru9wKeJfRrOIqRnTcNo4"


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Market:
    releases = {"probe": {"1.0.0": ("probe_ping",), "1.1.0": ("probe_ping", "probe_trace")}}
    return signed_market(tmp_path_factory.mktemp("market"), releases)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, market: Market) -> Iterator[Console]:
    """A console without the example skills."""
    with console_server(
        tmp_path_factory.mktemp("console"),
        example_skills=False,
        trusted_pack_keys=str(market.trusted),
        pack_indexes=(str(EXAMPLE_PACKS / "index.json"), str(market.index)),
        pack_keep_seconds=0,
    ) as served:
        yield served


def skill_names(console: Console) -> set[str]:
    return {skill.name for skill in console.manager.registry.list()}


def installed(console: Console) -> dict[str, str]:
    items = console.rest("GET", "/v1/packs").json()["items"]
    return {item["id"]: item["version"] for item in items}


def test_an_admin_installs_the_example_pack_from_its_index(console: Console, page: Page) -> None:
    login(page, console, "admin")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Packs").click()
    expect(page.get_by_role("heading", name="Packs", level=1)).to_be_visible()
    page.get_by_label("Search the indexes").fill("first look")
    page.get_by_label("Search the indexes").press("Enter")
    offer = page.locator("#offer-ops-basics")
    expect(page.locator("#offer-probe")).to_have_count(0)
    offer.get_by_role("button", name="Review and install…").click()

    expect(page.get_by_role("heading", name="Review ops-basics 1.1.0", level=1)).to_be_visible()
    summary = page.locator(".pack-summary")
    expect(summary.locator(".summary-skills tr", has_text="listening_sockets")).to_contain_text(
        re.compile(r"listening_sockets\s*safe\s*manager")
    )
    expect(summary.locator(".summary-personas")).to_contain_text("oncall: permission mode")
    expect(summary.locator(".signer")).to_have_text(EXAMPLE_SIGNER)
    expect(summary.locator(".trust-trusted")).to_have_text("signed, trusted key")
    assert "ops-basics" not in installed(console)  # the review changes nothing
    confirm = page.get_by_role("button", name="Confirm: install ops-basics 1.1.0")
    confirm.focus()  # the keyboard confirms as the mouse does
    page.keyboard.press("Enter")
    expect(page.locator(".pack-done")).to_contain_text("Installed ops-basics 1.1.0.")
    assert {"listening_sockets", "mount_report", "host_triage"} <= skill_names(console)
    card = page.locator("#pack-ops-basics")
    expect(card.locator(".card-head .trust-trusted")).to_have_text("signed, trusted key")
    expect(card.locator(".signer").first).to_have_text(EXAMPLE_SIGNER)
    expect(card).to_contain_text(re.compile(r"Installed by\s*admin, \d{4}-\d\d-\d\d "))
    digest = card.locator("details.digest")
    digest.locator("summary").click()
    full = console.rest("GET", "/v1/packs/ops-basics").json()["digest"]
    expect(digest.locator("#digest-ops-basics")).to_have_text(full)
    expect(digest.get_by_role("button", name="Copy")).to_be_visible()
    screenshot(page, "packs-installed", full_page=True)

    card.get_by_role("link", name="oncall").click()
    expect(page.get_by_role("heading", name="oncall", level=1)).to_be_visible()
    page.goto(console.url + "/packs")
    page.locator("#pack-ops-basics").get_by_role("link", name="mount_report").click()
    expect(page.get_by_role("heading", name="mount_report", level=1)).to_be_visible()


def test_a_chosen_version_then_upgrade_rollback_and_remove(console: Console, page: Page) -> None:
    login(page, console, "admin")
    page.goto(console.url + "/packs")
    offer = page.locator("#offer-probe")
    offer.get_by_label("Version").select_option("1.0.0")
    offer.get_by_role("button", name="Review and install…").click()
    review = page.locator(".pack-summary")
    digest = review.locator("#summary-digest-review").inner_text()
    expect(page.locator(".pack-review-lead")).to_contain_text("installs probe for the first time")
    expect(review.locator(".summary-skills tbody tr")).to_have_text([re.compile("probe_ping")])
    screenshot(page, "packs-review", full_page=True)
    assert "probe" not in installed(console)
    page.get_by_role("button", name="Confirm: install probe 1.0.0").click()
    expect(page.locator(".pack-done")).to_contain_text("Installed probe 1.0.0.")
    assert console.rest("GET", "/v1/packs/probe").json()["digest"] == digest  # what was shown
    expect(page.locator(".pack-undo").get_by_role("button")).to_have_text(
        "Roll back (remove probe)"
    )
    card = page.locator("#pack-probe")
    expect(card.locator(".badge.outdated")).to_have_text("outdated: 1.1.0 offered")
    card.locator("details.pack-capabilities summary").click()
    expect(card.locator(".pack-capabilities .summary-skills")).to_contain_text("probe_ping")
    screenshot(page, "packs", height=1040)  # docs/img/ui-packs.png is a copy of it

    card.get_by_role("button", name="Upgrade to 1.1.0…").click()
    expect(page.locator(".pack-review-lead")).to_contain_text("replaces the active probe 1.0.0")
    expect(page.locator(".summary-skills")).to_contain_text("probe_trace")
    assert installed(console)["probe"] == "1.0.0"
    page.get_by_role("button", name="Confirm: install probe 1.1.0").click()
    expect(page.locator(".pack-done")).to_contain_text("Upgraded probe from 1.0.0 to 1.1.0.")
    expect(page.locator(".pack-done")).to_contain_text("probe_trace")
    assert "probe_trace" in skill_names(console)
    card = page.locator("#pack-probe")
    expect(card.locator(".badge.outdated")).to_have_count(0)
    expect(card).to_contain_text("1.0.0 (previous)")

    page.locator(".pack-undo").get_by_role("button", name="Roll back to 1.0.0").click()
    expect(page.locator(".pack-done")).to_contain_text("Rolled probe back from 1.1.0 to 1.0.0.")
    expect(page.locator(".pack-undo")).to_have_count(0)
    assert "probe_trace" not in skill_names(console) and "probe_ping" in skill_names(console)

    page.locator("#pack-probe").get_by_role("link", name="Remove…").click()
    expect(page.get_by_role("heading", name="Remove probe?")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    assert installed(console).get("probe") == "1.0.0"
    page.locator("#pack-probe").get_by_role("link", name="Remove…").click()
    page.get_by_role("button", name="Remove probe").click()
    expect(page.locator(".pack-done")).to_contain_text("Removed probe 1.0.0")
    expect(page.locator("#pack-probe")).to_have_count(0)
    assert "probe" not in installed(console) and "probe_ping" not in skill_names(console)

    actions = [
        (entry["action"], entry["actor"], entry["data"]["version"])
        for entry in reversed(console.store.audit.entries(limit=100, subject="probe"))
        if entry["action"].startswith("pack.")
    ]
    assert actions == [
        ("pack.install", "admin", "1.0.0"),
        ("pack.upgrade", "admin", "1.1.0"),
        ("pack.rollback", "admin", "1.0.0"),
        ("pack.remove", "admin", None),
    ]


def test_uploading_a_signed_archive(
    console: Console, market: Market, page: Page, tmp_path: Path
) -> None:
    source = write_pack(tmp_path / "carried", "carried", skills=("carried_check",))
    archive = build_archive(source, tmp_path).path
    signature, signed = sign_path(archive, load_signing_key(market.key.private))
    login(page, console, "admin")
    page.goto(console.url + "/packs")
    page.get_by_label("Pack archive").set_input_files(archive)
    page.get_by_label("Its signature").set_input_files(signature)
    page.get_by_role("button", name="Upload and review…").click()
    expect(page.locator(".pack-summary .signer")).to_have_text(signed.signer)
    page.get_by_role("button", name="Confirm: install carried 1.0.0").click()

    expect(page.locator(".pack-done")).to_contain_text("Installed carried 1.0.0.")
    card = page.locator("#pack-carried")
    expect(card.locator(".signer").first).to_have_text(signed.signer)
    expect(card).to_contain_text(f"upload:{archive.name}")
    assert "carried_check" in skill_names(console)


def test_a_hostile_upload_is_refused_on_the_page_and_changes_nothing(
    console: Console, page: Page, page_guard: PageGuard, tmp_path: Path
) -> None:
    page_guard.expect("status of 400")
    slip = tar_gz(tmp_path / "slip.tar.gz", [Entry("../../../evil.sh", b"#!/bin/sh\n", 0o755)])
    before = (installed(console), tree(Path(console.settings.data_dir) / "packs"))
    login(page, console, "admin")
    page.goto(console.url + "/packs")
    page.get_by_label("Pack archive").set_input_files(slip)
    page.get_by_label("Allow unsigned").first.check()
    page.get_by_role("button", name="Upload and review…").click()

    refused = page.locator(".pack-refused")
    expect(refused).to_contain_text("Refused: nothing was changed")
    expect(refused.locator(".error-code")).to_have_text("unsafe_pack")
    expect(refused).to_contain_text("../../../evil.sh")
    after = (installed(console), tree(Path(console.settings.data_dir) / "packs"))
    assert after == before  # nothing staged left either (packs/.reviews holds no upload)
    assert not (tmp_path.parent.parent / "evil.sh").exists()


def test_a_viewer_has_no_packs_page(console: Console, page: Page, page_guard: PageGuard) -> None:
    page_guard.expect("status of 403")
    login(page, console, "vera")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link")).not_to_contain_text(
        ["Packs"]
    )
    response = page.goto(console.url + "/packs")
    assert response is not None and response.status == 403
    rest = console.rest("GET", "/v1/packs", "vera").json()["error"]["message"]
    expect(page.locator(".error-message")).to_have_text(rest)


def test_a_forged_post_without_the_csrf_token_is_refused(console: Console, page: Page) -> None:
    login(page, console, "admin")
    before = installed(console)
    for path, form in [
        ("/packs/install", {"pack": "probe"}),
        ("/packs/ops-basics/remove", {"confirmed": "yes"}),
    ]:
        answer = page.request.post(console.url + path, form=form)
        assert answer.status == 403, path
        assert "CSRF" in answer.text()
    assert installed(console) == before


def test_the_packs_pages_fit_a_phone_screen(console: Console, browser: Browser) -> None:
    guard = PageGuard()
    page = watched_page(browser, guard, viewport=PHONE)
    widths = {}
    try:
        login(page, console, "admin")
        page.goto(console.url + "/packs")
        page.locator("details.digest summary").first.click()
        widths["packs"] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-packs", full_page=True)
        removable = page.locator(".pack .card-head h3").first.inner_text()
        page.goto(console.url + f"/packs/{removable}/remove")
        widths["confirm"] = page.evaluate("document.documentElement.scrollWidth")
        page.goto(console.url + "/packs")
        page.locator("#offer-probe").get_by_role("button", name="Review and install…").click()
        expect(page.locator(".pack-summary")).to_be_visible()
        widths["review"] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-packs-review", full_page=True)
    finally:
        page.context.close()
    assert widths == {"packs": PHONE["width"], "confirm": PHONE["width"], "review": PHONE["width"]}
    assert not guard.unexpected(), guard.problems
