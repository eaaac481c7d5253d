"""The approvals inbox and the history pages in a real browser (headless Chromium): a dangerous
call approved by two admins in two browser contexts while the requester's inbox updates live
and then shows the call finished; no Approve button on one's own request and a forged approval
refused; a rejection with a comment; an agent run's request and transcript; history filters and
pages; the audit's verify button; a persona's tools. The page guard fails a test on any console
error or CSP violation. Screenshots go to tests/.screenshots/ (docs/ui.md shows some)."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from ongrid_skills.doors.web import history
from tests.support.agent import MODEL
from tests.support.browser import (
    PHONE,
    SCREENSHOTS,
    Console,
    PageGuard,
    console_server,
    login,
    screenshot,
    watched_page,
)
from tests.support.llm import API_KEY, FakeLLM, Reply, call
from tests.support.skills import EXAMPLE_SKILLS
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Console]:
    """The test console with the shipped example personas (incident_commander signs dangerous
    calls with two admins), its agent on the scripted LLM."""
    base = tmp_path_factory.mktemp("console")
    overrides = {
        "persona_dirs": (str(base / "personas"), str(EXAMPLE_SKILLS.parent / "personas")),
        "llm_provider": fake.flavour,
        "llm_base_url": fake.url,
        "llm_model": MODEL,
        "llm_api_key": API_KEY,
        "llm_max_retries": 0,
    }
    with console_server(base, **overrides) as served:
        yield served


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A harmless process for process_signal to stop (as in docs/getting-started.md)."""
    process = subprocess.Popen(["sleep", "600"])
    try:
        yield process
    finally:
        process.kill()
        process.wait(timeout=15)


def request(console: Console, skill: str, persona: str, args: Any, who: str = "olga") -> str:
    body = {"args": args, "persona": persona}
    response = console.rest("POST", f"/v1/skills/{skill}/execute", who, json=body)
    assert response.status_code == 202, response.text
    approval_id: str = response.json()["approval_id"]
    return approval_id


def watching(browser: Browser, guard: PageGuard, console: Console, who: str, **kw: Any) -> Page:
    """A page of its own browser context, logged in as ``who``."""
    page = watched_page(browser, guard, **kw)
    login(page, console, who)
    return page


def live_inbox(page: Page, console: Console) -> None:
    page.goto(console.url + "/approvals")
    expect(page.locator('[data-part="approvals-live"]')).to_have_attribute("data-live", "ready")
    page.evaluate("window.notReloaded = true")


def card(page: Page, approval_id: str) -> Locator:
    return page.locator(f"#approval-{approval_id}")


def card_shot(locator: Locator, name: str) -> None:
    """A PNG of one card (small enough for the docs), animations run to their end."""
    SCREENSHOTS.mkdir(exist_ok=True)
    locator.screenshot(path=str(SCREENSHOTS / f"{name}.png"), animations="disabled")


def no_reload(page: Page) -> None:
    assert page.evaluate("window.notReloaded === true"), "the page was reloaded"


def clean(guard: PageGuard, *pages: Page) -> None:
    for page in pages:
        page.context.close()
    problems = guard.unexpected()
    assert not problems, "the pages reported problems:\n" + "\n".join(problems)


def test_two_admins_approve_a_dangerous_call_while_the_requester_watches_live(
    console: Console,
    browser: Browser,
    page_guard: PageGuard,
    sleeper: subprocess.Popen[bytes],
) -> None:
    olga = watching(browser, page_guard, console, "olga")
    ada = watching(browser, page_guard, console, "admin")
    bob = watching(browser, page_guard, console, "admin2")
    live_inbox(olga, console)
    args = {"pid": sleeper.pid, "signal": "TERM"}
    approval_id = request(console, "process_signal", "incident_commander", args)

    # It arrives in the requester's inbox without a reload; she (an operator) may not sign it.
    mine = card(olga, approval_id)
    expect(mine).to_have_attribute("data-status", "pending")
    expect(mine.locator(".signature-count")).to_have_text("0 of 2 required (2 missing)")
    expect(mine.locator(".time-left")).to_have_text(re.compile(r"(\d+ h )?\d+ min( \d+ s)? left"))
    expect(mine.locator("pre.args")).to_have_text(
        f'{{\n  "pid": {sleeper.pid},\n  "signal": "TERM"\n}}'
    )
    expect(mine.get_by_role("button", name="Approve")).to_have_count(0)
    expect(mine.locator(".why-not")).to_contain_text("nobody approves their own request")
    screenshot(olga, "inbox-requested")

    # The second admin starts writing a comment in his inbox...
    live_inbox(bob, console)
    comment = card(bob, approval_id).get_by_label("Comment (optional)")
    comment.focus()
    bob.keyboard.type("Second pair of eyes: fine.")

    # ...while the first opens the request's page (the link of the approval webhooks) and signs.
    ada.goto(f"{console.url}/approvals/{approval_id}")
    expect(ada.locator('[data-part="approvals-live"]')).to_have_attribute("data-live", "ready")
    theirs = card(ada, approval_id)
    theirs.get_by_label("Comment (optional)").fill("Checked: a stray sleep, safe to stop.")
    theirs.get_by_role("button", name="Approve").click()
    expect(ada.get_by_role("status").first).to_have_text(
        "Your signature is recorded; the request waits for more."
    )
    expect(card(ada, approval_id).locator(".signature-count")).to_have_text(
        "1 of 2 required (1 missing)"
    )
    expect(card(ada, approval_id).get_by_role("button", name="Approve")).to_have_count(0)
    screenshot(ada, "approval-signed")
    card_shot(card(ada, approval_id), "card-signed")

    expect(mine.locator(".signature-count")).to_have_text("1 of 2 required (1 missing)")
    expect(mine.locator(".signatures")).to_contain_text("Checked: a stray sleep, safe to stop.")

    # His card shows the first signature; what he typed is still there, and he signs with the
    # keyboard.
    expect(card(bob, approval_id).locator(".signature-count")).to_have_text(
        "1 of 2 required (1 missing)"
    )
    comment = card(bob, approval_id).get_by_label("Comment (optional)")
    expect(comment).to_have_value("Second pair of eyes: fine.")
    expect(comment).to_be_focused()
    bob.keyboard.press("Tab")
    expect(card(bob, approval_id).get_by_role("button", name="Approve")).to_be_focused()
    bob.keyboard.press("Enter")
    expect(bob.get_by_role("status").first).to_have_text("Approved: the call runs now.")

    # The requester's inbox moves it to the decided ones, and shows the call finish.
    decided = olga.locator(f'ol[data-holds="decided"] #approval-{approval_id}')
    expect(decided).to_have_attribute("data-status", "approved")
    expect(decided.locator(".execution-state .status")).to_have_text("succeeded")
    expect(decided.get_by_role("link", name=re.compile("See the execution"))).to_have_attribute(
        "href", re.compile(r"^/executions/[0-9a-f]{32}$")
    )
    expect(
        olga.locator('ol[data-holds="pending"]').locator(f"#approval-{approval_id}")
    ).to_have_count(0)
    no_reload(olga)
    screenshot(olga, "inbox-approved")
    card_shot(decided, "card-approved")
    approval = console.store.approvals.get(approval_id)
    assert approval is not None
    assert [(s.principal, s.decision) for s in approval.signatures] == [
        ("admin", "approve"),
        ("admin2", "approve"),
    ]
    execution = console.manager.get(approval.execution_id)
    assert execution.result == {"pid": sleeper.pid, "signal": "TERM", "sent": True, "name": "sleep"}
    assert sleeper.wait(timeout=15) == -signal.SIGTERM
    clean(page_guard, olga, ada, bob)


def test_no_approve_button_on_ones_own_request_a_forged_one_is_refused_and_a_rejection_shows(
    console: Console, browser: Browser, page_guard: PageGuard
) -> None:
    approval_id = request(console, "restart_cache", "responder", {"service": "cache-9"})
    olga = watching(browser, page_guard, console, "olga")
    oscar = watching(browser, page_guard, console, "oscar")
    olga.goto(f"{console.url}/approvals/{approval_id}")
    expect(olga.locator('[data-part="approvals-live"]')).to_have_attribute("data-live", "ready")
    olga.evaluate("window.notReloaded = true")
    own = card(olga, approval_id)
    expect(own.get_by_role("button", name="Reject")).to_be_visible()
    expect(own.get_by_role("button", name="Approve")).to_have_count(0)

    # Forged from her own page, with its CSRF token: the desk refuses it all the same.
    page_guard.expect("status of 403")
    status = olga.evaluate(
        """async (id) => {
          const csrf = document.querySelector('input[name="csrf"]').value;
          const body = new URLSearchParams({csrf, comment: "forged"});
          const answer = await fetch(`/approvals/${id}/approve`, {method: "POST", body});
          return answer.status;
        }""",
        approval_id,
    )
    assert status == 403
    stored = console.store.approvals.get(approval_id)
    assert stored is not None
    assert (stored.status, stored.signatures) == ("pending", [])

    # Another operator rejects it with a comment; her page shows it without a reload.
    oscar.goto(console.url + "/approvals")
    theirs = card(oscar, approval_id)
    theirs.get_by_label("Comment (optional)").fill("Not during the change freeze.")
    theirs.get_by_role("button", name="Reject").click()
    expect(oscar.get_by_role("status").first).to_have_text("Rejected: the call will not run.")
    expect(own).to_have_attribute("data-status", "rejected")
    expect(own.locator(".signatures")).to_contain_text("Not during the change freeze.")
    expect(own.locator("form")).to_have_count(0)
    no_reload(olga)
    screenshot(olga, "approval-rejected")
    clean(page_guard, olga, oscar)


def test_a_request_from_an_agent_run_shows_the_run_and_leads_to_its_transcript(
    console: Console, browser: Browser, page_guard: PageGuard, fake: FakeLLM
) -> None:
    fake.add(
        Reply(
            "Checkout latency comes from a cold cache; restarting it.",
            [call("restart_cache", {"service": "checkout-cache"})],
        ),
        Reply("The checkout cache was restarted; latency should recover within a minute."),
    )
    started = console.rest(
        "POST",
        "/v1/agent/runs",
        "olga",
        json={"persona": "responder", "message": "Checkout is slow since 10:05. Fix it."},
    )
    assert started.status_code == 202, started.text
    run_id = started.json()["id"]

    def agents_request() -> list[Any]:
        pending = console.store.approvals.query(status="pending", limit=500)
        return [a for a in pending if a.requested_by == f"agent:{run_id}"]

    (asked,) = wait_for(agents_request, "the agent's request")
    oscar = watching(browser, page_guard, console, "oscar")
    oscar.goto(f"{console.url}/approvals/{asked.id}")
    shown = card(oscar, asked.id)
    expect(shown.locator(".asking")).to_contain_text("persona responder, started by olga")
    expect(shown.locator(".excerpt li")).to_have_count(2)
    expect(shown.locator(".excerpt")).to_contain_text("Checkout is slow since 10:05. Fix it.")
    screenshot(oscar, "approval-agent")
    card_shot(shown, "card-agent")
    shown.get_by_role("button", name="Approve").click()
    expect(oscar.get_by_role("status").first).to_have_text("Approved: the call runs now.")
    wait_for(
        lambda: console.rest("GET", f"/v1/agent/runs/{run_id}").json()["status"] == "done",
        "the run to finish",
    )
    card(oscar, asked.id).locator(".asking a").click()
    expect(oscar).to_have_url(f"{console.url}/agent/runs/{run_id}")
    transcript = oscar.locator("ol.transcript > li")
    expect(transcript).to_have_count(5)
    expect(transcript.nth(3)).to_contain_text("succeeded")
    expect(oscar.locator(".final-answer")).to_have_text(
        "The checkout cache was restarted; latency should recover within a minute."
    )
    screenshot(oscar, "agent-run")
    oscar.get_by_role("link", name="Agent runs").first.click()
    expect(oscar.locator(f'a[href="/agent/runs/{run_id}"]')).to_be_visible()
    clean(page_guard, oscar)


def test_history_filters_and_pages_in_a_browser(
    console: Console, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(history, "EXECUTIONS_PAGE", 3)
    made = []
    for n in range(4):
        response = console.rest(
            "POST", "/v1/skills/odd_text/execute", "oscar", json={"args": {"n": n}}
        )
        made.append(response.json()["id"])
    login(page, console, "vera")
    page.get_by_role("link", name="Executions").click()
    page.get_by_label("Skill").fill("odd_text")
    page.get_by_label("Status").select_option("succeeded")
    page.get_by_label("Requested by").fill("oscar")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"skill=odd_text&status=succeeded&requested_by=oscar"))
    rows = page.locator("table.executions tbody tr")
    expect(rows).to_have_count(3)
    first = [href.split("/")[-1] for href in _hrefs(rows)]
    screenshot(page, "executions")
    page.get_by_role("link", name="Older").click()
    expect(rows).to_have_count(1)
    assert first + [h.split("/")[-1] for h in _hrefs(rows)] == list(reversed(made))
    page.get_by_role("link", name="Newest").click()
    expect(rows).to_have_count(3)


def _hrefs(rows: Locator) -> list[str]:
    return [str(a.get_attribute("href")) for a in rows.locator('a[href^="/executions/"]').all()]


def test_the_audit_log_is_filtered_and_its_chain_verified_in_a_browser(
    console: Console, page: Page
) -> None:
    login(page, console, "vera")
    page.get_by_role("link", name="Audit").click()
    page.get_by_label("Action").fill("session.opened")
    page.get_by_role("button", name="Apply").click()
    actions = page.locator("table.audit tbody tr td:nth-child(4)")
    expect(actions.first).to_have_text("session.opened")
    assert set(actions.all_inner_texts()) == {"session.opened"}
    page.get_by_role("button", name="Verify chain").click()
    expect(page.locator(".verdict")).to_contain_text("Chain intact:")
    screenshot(page, "audit")


def test_a_personas_page_shows_what_it_is_offered_and_the_tools_a_model_gets(
    console: Console, page: Page
) -> None:
    login(page, console, "vera")
    page.get_by_role("link", name="Personas").click()
    page.get_by_role("link", name="incident_commander").click()
    expect(page.locator("ul.offered")).to_contain_text("process_signal")
    page.get_by_label("Format").select_option("anthropic")
    page.get_by_label("For the message").fill("a runaway process eats the CPU")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"format=anthropic&message=a\+runaway"))
    expect(page.locator("pre.tools")).to_contain_text('"input_schema"')
    expect(page.locator("pre.tools")).to_contain_text('"name": "process_signal"')
    screenshot(page, "persona")


def test_the_inbox_fits_a_phone_screen(
    console: Console, browser: Browser, page_guard: PageGuard
) -> None:
    request(console, "restart_cache", "responder", {"service": "cache-phone"})
    phone = watching(browser, page_guard, console, "oscar", viewport=PHONE)
    live_inbox(phone, console)
    width = phone.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page is {width} px wide on a {PHONE['width']} px screen"
    screenshot(phone, "inbox-phone")
    clean(page_guard, phone)
