"""The reviewer's opinion where people read it: REST, the CLI (``approvals show`` and ``list``),
the webhook (cut short, masked) and the console's inbox card (live, in a real browser). One
served console under uvicorn for the module, its reviewer on the scripted LLM."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, expect

from ongrid_skills.doors.cli.main import cli
from ongrid_skills.notify.messages import NOTE_CHARS
from tests.support.browser import Console, PageGuard, console_server, login, watched_page
from tests.support.console_calls import mcp_execution, request, run_request
from tests.support.llm import FakeLLM, Reply, call, llm_settings
from tests.support.skills import write_persona
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver, receiving

#: An opinion long enough to be cut in a webhook, with a secret-looking pair to be masked.
OPINION = (
    "Restarting the cache drops warm entries; the log shows password=hunter2 in the "
    "caller's notes, which should not be there. "
    + "It is otherwise routine. " * 30
    + "\nDecision: approve"
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def hooks() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM, hooks: Receiver
) -> Iterator[Console]:
    base = tmp_path_factory.mktemp("reviewed")

    def reviewer_persona(skills: Path) -> None:
        write_persona(skills.parent / "personas", "gatekeeper", body="You judge requests.")

    overrides: dict[str, Any] = llm_settings(
        fake, reviewer_persona="gatekeeper", approval_webhooks=(hooks.url,)
    )
    with console_server(
        base, example_skills=False, more_skills=reviewer_persona, **overrides
    ) as served:
        yield served


def reviewed(console: Console, approval_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        body: dict[str, Any] = console.rest("GET", f"/v1/approvals/{approval_id}", "vera").json()
        return body if (body.get("review") or {}).get("status") == "done" else None

    return wait_for(done, "the reviewer's opinion", 15)


def cli_out(console: Console, *args: str) -> str:
    env = {"ONGRID_URL": console.url, "ONGRID_TOKEN": console.tokens["vera"]}
    env["ONGRID_DATA_DIR"] = None
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout  # stderr says where it asked (→ URL)


def test_the_opinion_shows_over_rest_the_cli_mcp_and_the_webhook_masked_and_cut_there(
    console: Console, fake: FakeLLM, hooks: Receiver
) -> None:
    fake.add(Reply(OPINION))
    approval_id = request(console, "restart_cache")
    review = reviewed(console, approval_id)["review"]
    assert review["decision"] == "approve" and review["counted"] is False
    assert "password=[REDACTED]" in review["opinion"] and "hunter2" not in review["opinion"]

    shown = json.loads(cli_out(console, "approvals", "show", approval_id))
    assert shown["review"] == review
    listed = cli_out(console, "approvals", "list")
    header, *rows = listed.splitlines()  # a pipe: no rule under the header
    assert "REVIEW" in header.split()
    [row] = [r for r in rows if r.startswith(approval_id)]
    assert "approve" in row.split()

    result = mcp_execution(console, approval_id)
    assert result.structured_content is not None
    assert result.structured_content["review"] == review
    sentence = result.content[-1]
    assert isinstance(sentence, types.TextContent)
    assert sentence.text.endswith("The reviewer (gatekeeper) says: approve.")

    def told() -> dict[str, Any] | None:
        for body in hooks.bodies():
            if body["text"].startswith("Reviewed by reviewer:gatekeeper"):
                return dict(body)
        return None

    body = wait_for(told, "the reviewed webhook", 15)
    fields = dict(f["text"].split("\n", 1) for f in body["blocks"][0]["fields"])
    said = fields["*Reviewer*"]
    assert said.startswith("gatekeeper advises to approve (advice): Restarting the cache")
    assert len(said) <= NOTE_CHARS and said.endswith("…")
    assert "hunter2" not in json.dumps(body)


def test_the_chat_card_and_the_request_page_show_the_opinion(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(
        Reply("Restarting.", [call("restart_cache", {})]),
        Reply("The cache is warm at this hour; restart it tonight.\nDecision: reject"),
    )
    run_id, approval_id = run_request(console, "responder", "restart it")
    reviewed(console, approval_id)
    with console.logged_in("olga") as client:
        for path in (f"/chat/{run_id}/approvals/{approval_id}", f"/approvals/{approval_id}"):
            page = client.get(path)
            assert page.status_code == 200, page.text
            assert "advises to reject</span> (advice: it signs nothing)" in page.text
            assert "restart it tonight.\nDecision: reject</pre>" in page.text


def test_the_inbox_card_shows_the_opinion_when_it_arrives_live(
    console: Console, fake: FakeLLM, browser: Browser, page_guard: PageGuard
) -> None:
    gate = threading.Event()

    def later(_body: dict[str, Any]) -> Reply:
        gate.wait(15)
        return Reply("Wiping scratch during the backup window loses the backup.\nDecision: reject")

    fake.add(later)
    page = watched_page(browser, page_guard)
    try:
        login(page, console, "admin")
        page.goto(console.url + "/approvals")
        live = page.locator('[data-part="approvals-live"]')
        expect(live).to_have_attribute("data-live", "ready")
        approval_id = request(console, "wipe_scratch")
        card = page.locator(f"#approval-{approval_id}")
        expect(card.locator(".review-head")).to_contain_text("reading the request")
        gate.set()
        expect(card.locator(".review-head")).to_contain_text("advises to reject")
        expect(card.locator(".review-head")).to_contain_text("advice: it signs nothing")
        expect(card.locator(".review-opinion")).to_contain_text("loses the backup")
        expect(card.get_by_role("button", name="Approve")).to_be_visible()  # still theirs
    finally:
        gate.set()
        page.context.close()
    assert not page_guard.unexpected(), page_guard.unexpected()
