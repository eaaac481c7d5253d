"""Console pages of an operator's first hour, in headless Chromium: a finished call's page
without a busy bar, run again with its args filled in, copied as a CLI and a curl command that
work when pasted and hold no token; an instructions skill's page showing its body (rendered,
never run as HTML) and its /run address leading there; the bounds of a number written next to
its field; the REST API's reference for a logged-in session; all of it at a phone's width."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.support.browser import (
    PHONE,
    Console,
    PageGuard,
    console_server,
    login,
    screenshot,
    watched_page,
)
from tests.support.processes import CLI
from tests.support.run_skills import add_run_skills
from tests.support.skills import write_skill_md
from tests.support.waiting import wait_for

ARGS = {"host": "db1.internal", "retries": 4, "level": "high", "tags": ["a b", "it's"]}
#: An instructions-only SKILL.md whose body holds markup that must stay text.
NOTES_BODY = """# Disk triage notes

1. Run `host_info` first.
2. Then **stop** and report.

<script>document.title = "owned"</script>
[a bad link](javascript:alert(1))
"""


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    native = tmp_path_factory.mktemp("native")
    write_skill_md(
        native,
        "disk-notes",
        {"name": "disk_notes", "description": "How to look at a full disk."},
        NOTES_BODY,
    )
    base = tmp_path_factory.mktemp("console")
    with console_server(base, native_dirs=(str(native),)) as served:
        add_run_skills(served)
        yield served


@pytest.fixture(scope="module")
def finished(console: Console) -> str:
    """A call of form_echo that ended (it never reports progress): its execution id."""
    response = console.rest(
        "POST", "/v1/skills/form_echo/execute", "olga", json={"args": ARGS, "wait": True}
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded"
    return str(response.json()["id"])


def pasted(text: str, console: Console, token: str | None) -> subprocess.CompletedProcess[str]:
    """``text`` run by bash as a person pastes it: ongrid-skills and curl on the PATH, the token
    only in ONGRID_TOKEN (when given)."""
    env = {"PATH": f"{Path(CLI).parent}:{os.environ['PATH']}", "HOME": "/nonexistent"}
    if token is not None:
        env["ONGRID_TOKEN"] = token
    return subprocess.run(
        ["bash", "-c", text], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_a_finished_call_runs_again_with_its_args_and_copies_as_commands_without_the_token(
    console: Console, page: Page, finished: str
) -> None:
    login(page, console, "olga")
    page.goto(f"{console.url}/executions/{finished}")
    expect(page.locator(".live-status .status")).to_have_text("succeeded")
    # No progress was ever reported: no busy bar (`hidden` used to lose to display:flex).
    expect(page.locator(".progress-line")).to_be_hidden()
    expect(page.locator("#progress")).to_be_hidden()

    # Copy as CLI / curl, with the keyboard: the summary opens the commands.
    page.locator(".copy-as summary").focus()
    page.keyboard.press("Enter")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copied = {}
    for button in ("Copy the command", "Copy the curl command"):
        page.get_by_role("button", name=button).focus()
        page.keyboard.press("Enter")
        wait_for(
            lambda: page.evaluate("navigator.clipboard.readText()") not in copied.values(),
            f"{button}: the clipboard to change",
        )
        copied[button] = page.evaluate("navigator.clipboard.readText()")
    screenshot(page, "execution-again", full_page=True)
    cli, curl = copied["Copy the command"], copied["Copy the curl command"]
    for token in console.tokens.values():
        assert token not in cli and token not in curl
    assert "$ONGRID_TOKEN" in curl
    assert cli.startswith("ongrid-skills run form_echo ")

    ran = pasted(cli, console, console.tokens["olga"])
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == ARGS
    answer = pasted(curl, console, console.tokens["olga"])
    assert answer.returncode == 0, answer.stderr
    body = json.loads(answer.stdout)
    assert body["status"] == "succeeded" and body["args"] == ARGS
    refused = pasted(curl, console, None)  # nothing in the text stands in for the token
    assert json.loads(refused.stdout)["error"]["code"] == "unauthorized"

    # Run again: the form comes filled with the same args, bounds written next to their field.
    page.get_by_role("link", name="Run again…").click()
    expect(page).to_have_url(f"{console.url}/skills/form_echo/run?again={finished}")
    expect(page.get_by_label("host")).to_have_value("db1.internal")
    expect(page.get_by_label("retries")).to_have_value("4")
    expect(page.get_by_label("level")).to_have_value('"high"')
    expect(page.get_by_label("tags, item 1")).to_have_value("a b")
    expect(page.get_by_label("tags, item 2")).to_have_value("it's")
    expect(page.get_by_label("retries")).to_have_accessible_description(
        re.compile("Allowed: from 0 to 10")
    )
    expect(page.locator(".arg", has=page.get_by_label("ratio"))).to_contain_text(
        "Allowed: from 0 to 1"
    )
    expect(page.locator("fieldset.array", has_text="ports")).to_contain_text(
        "Each item: from 1 to 65535"
    )
    screenshot(page, "run-again")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page).to_have_url(re.compile(r"/executions/[0-9a-f]{32}$"))
    expect(page.locator(".live-status .status")).to_have_text("succeeded", timeout=20_000)
    again = page.url.rsplit("/", 1)[1]
    assert again != finished
    assert console.manager.get(again).args == ARGS


def test_an_instructions_skill_shows_its_body_and_its_run_address_leads_to_it(
    console: Console, page: Page
) -> None:
    login(page, console, "olga")
    page.goto(f"{console.url}/skills/disk_notes/run")  # was a 400 and a console error
    expect(page).to_have_url(f"{console.url}/skills/disk_notes")
    body = page.locator("section.instructions")
    expect(body.get_by_role("heading", name="Disk triage notes")).to_be_visible()
    expect(body.locator("ol > li")).to_have_count(2)
    expect(body.locator("strong")).to_have_text("stop")
    expect(body.locator("code").first).to_have_text("host_info")
    expect(body).to_contain_text('<script>document.title = "owned"</script>')  # as text
    expect(body.locator("script")).to_have_count(0)
    expect(body.locator("a")).to_have_count(0)  # the javascript: link stays text
    assert page.title() != "owned"
    expect(page.get_by_role("heading", name="Arguments (JSON Schema)")).to_have_count(0)
    expect(page.get_by_role("link", name="Run…")).to_have_count(0)
    expect(page.get_by_role("note")).to_contain_text("never run itself")
    screenshot(page, "skill-instructions", full_page=True)


def test_the_api_reference_opens_for_a_logged_in_session_from_our_own_origin(
    console: Console, page: Page
) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    login(page, console, "vera")
    page.get_by_role("link", name="API", exact=True).click()
    expect(page).to_have_url(f"{console.url}/docs")
    expect(page.get_by_role("heading", name="REST API")).to_be_visible()
    execute = page.locator("section.api-op", has_text="POST /v1/skills/{name}/execute")
    expect(execute).to_contain_text("ExecuteBody")
    expect(execute).to_contain_text("429")
    screenshot(page, "api-docs")
    execute.get_by_role("link", name="ExecuteBody").click()
    expect(page).to_have_url(f"{console.url}/docs#schema-ExecuteBody")
    expect(page.locator("#schema-ExecuteBody pre")).to_be_in_viewport()
    expect(page.locator("#schema-ExecuteBody pre")).to_contain_text('"args"')
    assert requested and all(url.startswith(console.url) for url in requested), requested


def test_these_pages_fit_a_phone_screen(console: Console, browser: Browser, finished: str) -> None:
    guard = PageGuard()
    page = watched_page(browser, guard, viewport=PHONE)
    widths = {}
    try:
        login(page, console, "admin")
        for path in ("/hosts", f"/executions/{finished}", "/skills/disk_notes", "/docs"):
            page.goto(console.url + path)
            widths[path] = page.evaluate("document.documentElement.scrollWidth")
        screenshot(page, "phone-docs")
        page.goto(console.url + "/hosts")
        screenshot(page, "phone-hosts", full_page=True)
    finally:
        page.context.close()
    assert widths == dict.fromkeys(widths, PHONE["width"])
    assert not guard.unexpected(), guard.problems
