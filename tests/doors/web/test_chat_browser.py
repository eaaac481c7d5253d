"""The chat in a real browser (headless Chromium) against the served app and a scripted LLM on
loopback: a conversation where the agent calls a safe skill, a mutating one its requester
confirms on the card, and a dangerous one two admins sign in two other browser contexts while
the chat waits and updates live, then answers; a run stopped and continued with the keyboard.
The page guard fails a test on any console error or CSP violation; each page fits a phone."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, Route, expect

from tests.support.browser import (
    PHONE,
    SCREENSHOTS,
    Console,
    PageGuard,
    login,
    screenshot,
    watched_page,
)
from tests.support.chat_console import chat_console
from tests.support.hostile import HOSTILE_TEXT
from tests.support.llm import FakeLLM, PersonaScripts, Reply, call
from tests.support.waiting import wait_for

RUN_URL = re.compile(r"/chat/([0-9a-f]{32})(#.*)?$")


@pytest.fixture(autouse=True)
def patient_expect() -> Iterator[None]:
    """A run's next turn goes through the scripted model and the agent service: on a loaded
    machine it takes longer than Playwright's default 5 s, never forever."""
    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Console]:
    with chat_console(tmp_path_factory.mktemp("console"), fake) as served:
        yield served


def watching(browser: Browser, guard: PageGuard, console: Console, who: str, **kw: Any) -> Page:
    page = watched_page(browser, guard, **kw)
    login(page, console, who)
    return page


def tool(page: Page, name: str) -> Locator:
    return page.locator(".tool-call").filter(has=page.locator(f'code:text-is("{name}")')).last


def pending_request(console: Console, run_id: str, skill: str) -> str:
    def found() -> str | None:
        for approval in console.store.approvals.query(status="pending", limit=500):
            if approval.requested_by == f"agent:{run_id}" and approval.skill == skill:
                return approval.id
        return None

    return wait_for(found, f"the request of {skill}")


def fits_the_phone(page: Page) -> None:
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide on a phone"


def clean(guard: PageGuard, *pages: Page) -> None:
    for page in pages:
        page.context.close()
    problems = guard.unexpected()
    assert not problems, "the pages reported problems:\n" + "\n".join(problems)


def test_a_conversation_with_a_safe_a_confirmed_and_a_dual_signed_call(
    console: Console, browser: Browser, page_guard: PageGuard, fake: FakeLLM
) -> None:
    fake.add(
        Reply(HOSTILE_TEXT, [call("hostile_dump")]),
        Reply("Restarting the cache.", [call("restart_cache")]),
        Reply("Now wiping the scratch disk.", [call("wipe_scratch")]),
        Reply("Done: the <b>cache</b> restarted and the scratch disk wiped."),
    )
    olga = watching(browser, page_guard, console, "olga")
    olga.goto(console.url + "/skills")
    olga.get_by_role("link", name="Chat").click()
    olga.get_by_label("Persona").select_option("commander")
    olga.get_by_label("Message").fill("The cache is stale and scratch is full.")
    olga.get_by_label("Message").press("Control+Enter")
    expect(olga).to_have_url(RUN_URL)
    match = RUN_URL.search(olga.url)
    assert match
    run_id = match.group(1)
    chat = olga.locator('[data-part="chat-live"]')
    expect(chat).to_have_attribute("data-live", "ready")

    # The safe call streams in, its huge JSON folded and indented; what the model and the skill
    # wrote is text, its control characters visible. Then the mutating call waits for her
    # confirmation on its card.
    dump = tool(olga, "hostile_dump")
    expect(dump.locator(".call-status")).to_have_text(re.compile(r"^succeeded in \d+\.\d+ s$"))
    fold = dump.locator("details.fold")
    expect(fold.locator("summary")).to_have_text(re.compile(r"^Result \(\d{4} lines, JSON\)$"))
    expect(fold.locator("pre")).to_be_hidden()
    fold.locator("summary").click()
    expect(fold.locator("pre")).to_contain_text('"html": "<b>bold</b><script>alert(3)</script>"')
    expect(fold.locator("pre")).to_contain_text('"esc": "\\u001b[2J"')
    expect(olga.locator(".turn-assistant .prose").first).to_have_text(
        '<img src=x onerror="alert(1)"><script>alert(2)</script>\\x1b[31mred\\u202eevil'
    )
    assert chat.locator("img, b, script").count() == 0
    restart = tool(olga, "restart_cache")
    expect(restart.locator(".waiting")).to_have_text(re.compile("^Waiting for a confirmation"))
    restart.get_by_role("button", name="Confirm").click()
    expect(olga).to_have_url(RUN_URL)
    expect(chat).to_have_attribute("data-live", "ready")
    olga.evaluate("window.notReloaded = true")
    expect(tool(olga, "restart_cache").locator(".call-status")).to_have_text(
        re.compile(r"^succeeded in ")
    )
    expect(tool(olga, "restart_cache").locator(".chat-card .status")).to_have_text("approved")

    # The dangerous one waits for two admins; she (its requester, an operator) has no button.
    approval_id = pending_request(console, run_id, "wipe_scratch")
    wipe = tool(olga, "wipe_scratch")
    expect(wipe.locator(".waiting")).to_have_text(
        re.compile(r"^Waiting for 2 signatures \(0 of 2\)")
    )
    expect(wipe.get_by_role("button", name="Approve")).to_have_count(0)
    expect(olga.locator(".run-status .status")).to_have_text("waiting approval")
    for who in ("admin", "admin2"):
        signer = watching(browser, page_guard, console, who)
        signer.goto(f"{console.url}/approvals/{approval_id}")
        signer.locator(f"#approval-{approval_id}").get_by_role("button", name="Approve").click()
        expect(signer.get_by_role("status").first).to_contain_text(re.compile("signature|Approved"))
        signer.context.close()
        if who == "admin":
            expect(wipe.locator(".waiting")).to_have_text(
                re.compile(r"^Waiting for 1 signature \(1 of 2\)")
            )
            expect(wipe.locator(".signers")).to_have_text(re.compile("Signed by admin admin"))
            SCREENSHOTS.mkdir(exist_ok=True)  # docs/img/ui-chat.png
            shot = SCREENSHOTS / "ui-chat.png"
            olga.screenshot(path=str(shot), full_page=True, animations="disabled")

    # The run resumes by itself and answers; the answer is text, not markup.
    expect(wipe.locator(".call-status")).to_have_text(re.compile(r"^succeeded in "))
    expect(wipe.locator(".chat-card .status")).to_have_text("approved")
    last = olga.locator(".turn-assistant .prose").last
    expect(last).to_have_text("Done: the <b>cache</b> restarted and the scratch disk wiped.")
    expect(chat).to_have_attribute("data-ended", "true")
    expect(olga.get_by_label("Continue the conversation")).to_be_visible()
    assert olga.evaluate("window.notReloaded === true"), "the chat was reloaded"
    screenshot(olga, "chat-answered", full_page=True)
    fits_the_phone(olga)
    clean(page_guard, olga)


def test_a_stopped_run_is_continued_with_the_keyboard(
    console: Console, browser: Browser, page_guard: PageGuard, fake: FakeLLM, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    fake.add(Reply("Waiting for the gate.", [call("gated_wait", {"gate": str(gate)})]))
    olga = watching(browser, page_guard, console, "olga", viewport=PHONE)
    olga.goto(console.url + "/chat")
    fits_the_phone(olga)
    olga.get_by_label("Message").fill("Wait for the gate.")
    olga.get_by_role("button", name="Send").click()
    expect(olga).to_have_url(RUN_URL)
    gated = tool(olga, "gated_wait")
    expect(gated.locator(".stderr")).to_have_text("waiting for the gate")
    expect(gated.locator(".call-status")).to_have_text("running")
    fits_the_phone(olga)
    olga.get_by_role("button", name="Stop the run").click()
    expect(olga.locator(".run-status .status")).to_have_text("cancelled")
    expect(tool(olga, "gated_wait").locator(".call-status")).to_have_text(
        "no result: the run ended cancelled"
    )
    fake.add(Reply("Stopped as asked; nothing else to do."))
    box = olga.get_by_label("Continue the conversation")
    box.fill("Fine, leave it.")
    box.press("Control+Enter")
    expect(olga.locator(".turn-assistant .prose").last).to_have_text(
        "Stopped as asked; nothing else to do."
    )
    expect(olga.locator(".run-status .status")).to_have_text("done")
    clean(page_guard, olga)


def test_what_is_typed_in_an_ended_runs_box_survives_the_page_taking_the_runs_end(
    console: Console, browser: Browser, page_guard: PageGuard, fake: FakeLLM
) -> None:
    # A page opened on a run that has just ended follows its events, then, at their end, swaps
    # in the page's new controls: the compose box the operator is typing in among them.
    fake.add(Reply("All quiet."))
    olga = watching(browser, page_guard, console, "olga")
    olga.goto(console.url + "/chat")
    olga.get_by_label("Message").fill("Anything up?")
    olga.get_by_role("button", name="Send").click()
    expect(olga).to_have_url(RUN_URL)
    expect(olga.locator(".run-status .status")).to_have_text("done")
    page_url = olga.url.split("#")[0]
    held: list[Route] = []

    def hold_the_swap(route: Route) -> None:
        if route.request.resource_type == "fetch":
            held.append(route)  # answered once the box holds the operator's words
        else:
            route.continue_()

    olga.route(page_url, hold_the_swap)
    with olga.expect_request(lambda r: r.resource_type == "fetch" and r.url == page_url):
        olga.goto(page_url)
    box = olga.get_by_label("Continue the conversation")
    box.fill("And the disks?")
    deadline = time.monotonic() + 20
    while not held:  # each call into the page lets Playwright hand it the held request
        assert time.monotonic() < deadline, "the page never asked for its new controls"
        olga.evaluate("0")
    held[0].continue_()
    expect(olga.locator("[data-ended='true']")).to_have_count(1)
    expect(box).to_have_value("And the disks?")
    expect(box).to_be_focused()
    olga.unroute(page_url)
    clean(page_guard, olga)


def test_the_chat_shows_a_delegated_runs_tool_call_nested_under_its_delegate_call(
    console: Console, browser: Browser, page_guard: PageGuard, fake: FakeLLM
) -> None:
    PersonaScripts(
        fake,
        {
            "coordinator": [
                Reply(calls=[call("delegate", {"persona": "reader", "task": "Is db-01 up?"})]),
                Reply("The reader says db-01 is up."),
            ],
            "reader": [Reply(calls=[call("host_info")]), Reply("db-01 is up.")],
        },
        coordinator="You are a coordinator",
    )
    try:
        olga = watching(browser, page_guard, console, "olga")
        olga.goto(console.url + "/chat?persona=coordinator")
        olga.get_by_label("Message").fill("Is db-01 up?")
        olga.get_by_role("button", name="Send").click()
        expect(olga).to_have_url(RUN_URL)
        delegated = tool(olga, "delegate")
        nested = delegated.locator("section.child-run")
        expect(nested.locator(".child-head")).to_have_text(
            re.compile(r"^Delegated to reader · run ")
        )
        inner = nested.locator(".tool-call").filter(has=olga.locator('code:text-is("host_info")'))
        expect(inner.locator(".call-status")).to_have_text(re.compile(r"^succeeded in "))
        expect(delegated.locator(":scope > .call-result pre")).to_have_text("db-01 is up.")
        expect(olga.locator(".turn-assistant .prose").last).to_have_text(
            "The reader says db-01 is up."
        )
        child_link = nested.locator(".child-head a")
        href = child_link.get_attribute("href") or ""
        assert RUN_URL.search(href), href
        child_link.click()
        expect(olga.locator(".run-facts")).to_contain_text("delegated by run")
        expect(olga.get_by_text("A delegated run: continue")).to_be_visible()
        expect(olga.get_by_label("Continue the conversation")).to_have_count(0)
        olga.get_by_role("link", name="the stored transcript").click()
        expect(olga.locator("dl")).to_contain_text(re.compile(r"Delegated by\s*run "))
        clean(page_guard, olga)
    finally:
        fake.fallback = None
