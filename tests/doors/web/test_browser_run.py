"""Running skills in a real browser (headless Chromium): a safe run watched live until its
result, a reload in the middle that replays and keeps following, a mutating run confirmed, a
dangerous run that becomes an approval request, a viewer without Run and a forged post refused,
errors next to their fields, array rows, a cancel, a live page whose token is revoked, and a
clean console throughout. Screenshots of the run form and the execution page go to
tests/.screenshots/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from ongrid_skills.types import Role
from tests.support.browser import (
    PHONE,
    Console,
    PageGuard,
    console_server,
    login,
    screenshot,
    watched_page,
)
from tests.support.run_skills import STEPPED_RESULT, add_run_skills
from tests.support.waiting import wait_for

LIVE = 20_000  # ms: how long a live update may take under a loaded machine


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with console_server(tmp_path_factory.mktemp("console")) as served:
        add_run_skills(served)
        yield served


def open_run_form(page: Page, console: Console, skill: str) -> None:
    page.goto(f"{console.url}/skills/{skill}")
    page.get_by_role("link", name="Run…").click()
    expect(page).to_have_url(f"{console.url}/skills/{skill}/run")


def event_texts(page: Page) -> list[str]:
    return page.locator("ol.timeline .event-text").all_inner_texts()


def test_a_safe_run_is_watched_live_until_its_result(
    console: Console, page: Page, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    login(page, console, "olga")
    open_run_form(page, console, "stepped_check")
    page.get_by_label("gate").fill(str(gate))
    screenshot(page, "run-form")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page).to_have_url(re.compile(r"/executions/[0-9a-f]{32}$"))
    status = page.locator(".live-status .status")
    timeline = page.locator("ol.timeline")
    expect(status).to_have_text("running")
    expect(timeline).to_contain_text("checking the disks", timeout=LIVE)
    expect(page.locator("#progress")).to_have_js_property("value", 1, timeout=LIVE)
    expect(page.locator("#progress")).to_have_js_property("max", 3)
    expect(page.locator(".progress-text")).to_have_text("1 / 3 disks checked")
    expect(page.get_by_role("button", name="Cancel this call")).to_be_visible()
    screenshot(page, "execution-running")

    gate.touch()  # the second step appears without a reload
    expect(timeline).to_contain_text("checking the network", timeout=LIVE)
    expect(page.locator(".progress-text")).to_have_text("2 / 3 network checked")
    screenshot(page, "execution-live")  # docs/img/ui-execution.png is a copy of it
    Path(f"{gate}.2").touch()
    expect(status).to_have_text("succeeded", timeout=LIVE)
    raw = page.locator("#result-raw")
    expect(raw).to_have_text(STEPPED_RESULT, timeout=LIVE)  # the bytes, not a re-serialisation
    pretty = page.locator(".result-pretty")
    assert json.loads(pretty.inner_text()) == json.loads(STEPPED_RESULT)
    assert "\n  " in pretty.inner_text()
    expect(page.get_by_role("button", name="Cancel this call")).to_have_count(0)
    expect(page.locator(".duration")).to_have_text(re.compile(r"^\d+ ms$"))
    times = page.locator("ol.timeline time").all_inner_texts()
    assert times and all(re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", t) for t in times)
    assert event_texts(page) == [
        "running",
        "checking the disks",
        "1 / 3 disks checked",
        "checking the network",
        "2 / 3 network checked",
        "3 / 3",
        "succeeded",
    ]
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.get_by_role("button", name="Copy the result").click()
    expect(page.locator(".outcome .copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == STEPPED_RESULT
    screenshot(page, "execution", full_page=True)


def test_reloading_mid_run_replays_the_timeline_and_keeps_following(
    console: Console, page: Page, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    login(page, console, "olga")
    open_run_form(page, console, "stepped_check")
    page.get_by_label("gate").fill(str(gate))
    page.get_by_label("gate").press("Enter")  # the form's default action is Run
    expect(page.locator("ol.timeline")).to_contain_text("disks checked", timeout=LIVE)
    page.reload()
    expect(page.locator("ol.timeline")).to_contain_text("disks checked")
    assert event_texts(page) == ["running", "checking the disks", "1 / 3 disks checked"]
    gate.touch()
    expect(page.locator("ol.timeline")).to_contain_text("network checked", timeout=LIVE)
    page.reload()
    gate2 = Path(f"{gate}.2")
    gate2.touch()
    expect(page.locator(".live-status .status")).to_have_text("succeeded", timeout=LIVE)
    expect(page.locator("#result-raw")).to_have_text(STEPPED_RESULT, timeout=LIVE)
    texts = event_texts(page)
    assert texts[:5] == [
        "running",
        "checking the disks",
        "1 / 3 disks checked",
        "checking the network",
        "2 / 3 network checked",
    ]
    assert texts[5:] == ["3 / 3", "succeeded"]  # nothing twice, nothing lost
    seqs = page.locator("ol.timeline li").evaluate_all("items => items.map(i => i.dataset.seq)")
    assert seqs == [str(n) for n in range(1, 8)]


def test_a_mutating_run_is_confirmed_on_a_second_page(console: Console, page: Page) -> None:
    login(page, console, "olga")
    open_run_form(page, console, "restart_cache")
    expect(page.locator(".notice.caution")).to_contain_text("You will see exactly what will run")
    page.get_by_role("button", name="Review and confirm").click()
    expect(page.get_by_role("heading", name="Confirm: restart_cache")).to_be_visible()
    expect(page.locator(".args-preview")).to_have_text("{}")
    expect(page.get_by_role("status")).to_contain_text("It runs as soon as you confirm")
    screenshot(page, "run-confirm")
    page.get_by_role("button", name="Confirm and run").click()
    expect(page).to_have_url(re.compile(r"/executions/[0-9a-f]{32}$"))
    expect(page.locator(".live-status .status")).to_have_text("succeeded", timeout=LIVE)
    expect(page.locator("#result-raw")).to_have_text('{"ok": true}', timeout=LIVE)


def test_a_dangerous_run_creates_an_approval_request(console: Console, page: Page) -> None:
    login(page, console, "olga")
    open_run_form(page, console, "wipe_scratch")
    expect(page.locator(".notice.caution")).to_contain_text("two distinct signers")
    page.get_by_role("button", name="Review and confirm").click()
    expect(page.get_by_role("heading", name="Request approval: wipe_scratch")).to_be_visible()
    page.get_by_role("button", name="Request approval").click()
    expect(page.locator(".live-status .status")).to_have_text("pending approval")
    link = page.get_by_role("link", name=re.compile(r"^request [0-9a-f]{12}$"))
    approval_id = (link.get_attribute("href") or "").rsplit("/", 1)[1]
    approval = console.store.approvals.get(approval_id)
    assert approval is not None
    assert (approval.skill, approval.signatures_required, approval.requested_by) == (
        "wipe_scratch",
        2,
        "olga",
    )
    expect(page.locator(".execution-head")).to_contain_text("0 of 2 signatures")
    screenshot(page, "execution-pending-approval")


def test_a_viewer_has_no_run_button_on_a_mutating_skill_and_a_forged_post_is_refused(
    console: Console, page: Page, page_guard: PageGuard
) -> None:
    page_guard.expect("status of 403")
    login(page, console, "vera")
    page.goto(console.url + "/skills/restart_cache")
    expect(page.get_by_role("link", name="Run…")).to_have_count(0)
    page.goto(console.url + "/skills/restart_cache/run")
    expect(page.get_by_role("button", name=re.compile("^(Run|Review and confirm)$"))).to_have_count(
        0
    )
    before = len(console.store.executions.page(skill="restart_cache", limit=500)[0])
    status = page.evaluate(
        """() => fetch("/skills/restart_cache/run", {
            method: "POST",
            headers: {"content-type": "application/x-www-form-urlencoded"},
            body: "_action=confirm&csrf="
              + encodeURIComponent(document.querySelector("input[name=csrf]").value),
        }).then((response) => response.status)"""
    )
    assert status == 403
    [latest, *rest] = console.store.executions.page(skill="restart_cache", limit=500)[0]
    assert len(rest) == before  # one more row: the refusal, recorded as REST records it
    assert (latest.status.value, latest.requested_by) == ("denied", "vera")
    page.goto(console.url + "/skills/form_echo")
    expect(page.get_by_role("link", name="Run…")).to_be_visible()  # safe skills: a viewer runs


def test_field_errors_are_shown_next_to_their_fields(
    console: Console, page: Page, page_guard: PageGuard
) -> None:
    page_guard.expect("status of 400")  # the form comes back as a 400: that is its answer
    login(page, console, "olga")
    open_run_form(page, console, "form_echo")
    page.get_by_label("retries").fill("11")
    page.get_by_label("cpu").fill("")
    page.get_by_label("memory").fill("64")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("Not run")
    host = page.locator(".arg:has(#f0)")
    expect(host.locator(".field-error")).to_have_text("required")
    expect(page.get_by_label("host")).to_have_attribute("aria-invalid", "true")
    retries = page.locator(".arg:has(input[name='a/retries'])")
    expect(retries.locator(".field-error")).to_have_text("11 is greater than the maximum of 10")
    expect(page.get_by_label("retries")).to_have_value("11")
    cpu = page.locator(".arg:has(input[name='a/limits/cpu'])")
    expect(cpu.locator(".field-error")).to_have_text("required")
    screenshot(page, "run-form-errors", full_page=True)


def test_array_rows_are_added_and_removed_in_place(console: Console, page: Page) -> None:
    login(page, console, "olga")
    open_run_form(page, console, "form_echo")
    page.get_by_label("host").fill("db1")
    tags = page.locator("fieldset.array:has(legend:has-text('tags'))")
    tags.get_by_label("tags, item 1", exact=True).fill("web")
    tags.get_by_role("button", name="Add a row").click()
    tags.get_by_label("tags, item 2", exact=True).fill("db")
    tags.get_by_role("button", name="Add a row").click()
    tags.get_by_label("tags, item 3", exact=True).fill("cache")
    tags.get_by_role("button", name="Remove tags, item 2").click()
    expect(tags.locator("li.row")).to_have_count(2)
    page.get_by_label("verbose").select_option("false")
    page.get_by_label("level").select_option("high")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator(".live-status .status")).to_have_text("succeeded", timeout=LIVE)
    result = json.loads(page.locator("#result-raw").inner_text())
    assert result == {"host": "db1", "level": "high", "verbose": False, "tags": ["web", "cache"]}


def test_the_persona_picker_shows_what_the_chosen_persona_is_offered(
    console: Console, page: Page, page_guard: PageGuard
) -> None:
    page_guard.expect("status of 403")  # the refusal comes back with the form, as a 403
    login(page, console, "olga")
    open_run_form(page, console, "restart_cache")
    offers = page.locator("details.persona-offers")
    page.get_by_label("Persona").select_option("reader")
    expect(offers.locator("summary")).to_have_text("What reader is offered")
    expect(offers.locator("section[data-persona='reader']")).to_be_visible()
    expect(offers.locator("section[data-persona='reader']")).to_contain_text(
        "not offered this skill"
    )
    expect(offers.locator("section[data-persona='responder']")).to_be_hidden()
    page.get_by_role("button", name="Review and confirm").click()
    expect(page.get_by_role("alert")).to_contain_text(
        "persona mode read-only does not permit mutating skills"
    )


def test_a_running_call_is_cancelled_from_its_page(
    console: Console, page: Page, tmp_path: Path
) -> None:
    login(page, console, "olga")
    open_run_form(page, console, "gated_wait")
    page.get_by_label("gate").fill(str(tmp_path / "never"))
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.locator("ol.timeline")).to_contain_text("waiting for the gate", timeout=LIVE)
    page.get_by_role("button", name="Cancel this call").click()
    expect(page.locator(".live-status .status")).to_have_text("cancelled", timeout=LIVE)
    expect(page.locator(".outcome")).to_contain_text("cancelled")
    expect(page.get_by_role("button", name="Cancel this call")).to_have_count(0)


def test_the_run_form_and_the_execution_page_fit_a_phone_screen(
    console: Console, browser: Browser, tmp_path: Path
) -> None:
    guard = PageGuard()
    page = watched_page(browser, guard, viewport=PHONE)
    try:
        login(page, console, "olga")
        page.goto(console.url + "/skills/form_echo/run")
        widths = {"run form": page.evaluate("document.documentElement.scrollWidth")}
        screenshot(page, "phone-run-form", full_page=True)
        gate = tmp_path / "gate"
        gate.touch()
        Path(f"{gate}.2").touch()
        page.goto(console.url + "/skills/stepped_check/run")
        page.get_by_label("gate").fill(str(gate))
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.locator("#result-raw")).to_have_text(STEPPED_RESULT, timeout=LIVE)
        widths["execution"] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-execution", full_page=True)
    finally:
        page.context.close()
    assert widths == {"run form": PHONE["width"], "execution": PHONE["width"]}
    assert not guard.unexpected(), guard.problems


def test_a_revoked_token_stops_the_live_page_which_says_the_session_has_ended(
    console: Console, page: Page, tmp_path: Path
) -> None:
    token, info = console.store.tokens.create("rhea", Role.OPERATOR)
    console.tokens["rhea"] = token
    gate = tmp_path / "gate"
    login(page, console, "rhea")
    open_run_form(page, console, "stepped_check")
    page.get_by_label("gate").fill(str(gate))
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page).to_have_url(re.compile(r"/executions/[0-9a-f]{32}$"))
    timeline = page.locator("ol.timeline")
    expect(timeline).to_contain_text("checking the disks", timeout=LIVE)
    console.store.tokens.revoke(info.id)  # as `token revoke rhea` does
    note = page.locator(".live-note")
    expect(note).to_have_text(
        "Your session has ended: log in again to follow the call.", timeout=LIVE
    )
    gate.touch()  # the call goes on; the page no longer follows it (no reconnect, no 401)
    Path(f"{gate}.2").touch()
    execution_id = page.url.rsplit("/", 1)[1]
    wait_for(
        lambda: (
            console.rest("GET", f"/v1/executions/{execution_id}").json()["status"] == "succeeded"
        ),
        "the call to finish",
    )
    expect(timeline).not_to_contain_text("checking the network")
