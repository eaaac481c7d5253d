"""A request's preview (SPEC §20) where people read it: REST, the CLI (``approvals show``), MCP,
the webhook (cut short, masked), the reviewer's prompt, the request page and the console's inbox
card (live, in a real browser). One served console under uvicorn for the module, its reviewer
on the scripted LLM."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from click.testing import CliRunner
from playwright.sync_api import Browser, expect

from ongrid_skills.doors.cli.main import cli
from ongrid_skills.notify.messages import PREVIEW_RESULT_CHARS
from tests.support.browser import Console, PageGuard, console_server, login, watched_page
from tests.support.console_calls import mcp_execution, request, run_request
from tests.support.llm import FakeLLM, Reply, call, llm_settings
from tests.support.skills import write_exec, write_persona, write_skill
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver, receiving

RUN = "#!/bin/sh\ncat >/dev/null\necho '{\"rotated\": true}'\n"
# A long plan with a secret-looking pair: cut and masked in the webhook, masked for the reviewer.
PLAN = """#!/bin/sh
cat >/dev/null
printf '{"would_rotate": ["api-key-1", "api-key-2"], "note": "password=hunter2 %s"}\\n' \\
  "$(printf 'then reload the proxies; %.0s' $(seq 40))"
"""
FAILING = "#!/bin/sh\ncat >/dev/null\necho 'no inventory' >&2\nexit 4\n"
# Waits for a gate file in its folder (the test opens it), then says what it would restart.
GATED = """#!/bin/sh
cat >/dev/null
i=0
while [ ! -e gate ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
echo '{"would_restart": ["web-1", "web-2"]}'
"""


def write_skills(skills: Path) -> None:
    write_persona(skills.parent / "personas", "gatekeeper", body="You judge requests.")
    for name, plan in (("rotate_keys", PLAN), ("purge_queue", FAILING), ("restart_web", GATED)):
        folder = write_skill(
            skills, name, RUN, preview={"entry": "plan.sh"}, **{"class": "mutating"}
        )
        write_exec(folder, "plan.sh", plan)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.fallback = lambda _body: Reply("Routine.\nDecision: approve")
        yield server


@pytest.fixture(scope="module")
def hooks() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def console(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM, hooks: Receiver
) -> Iterator[Console]:
    overrides: dict[str, Any] = llm_settings(
        fake, reviewer_persona="gatekeeper", approval_webhooks=(hooks.url,)
    )
    base = tmp_path_factory.mktemp("previewed")
    with console_server(
        base, example_skills=False, more_skills=write_skills, **overrides
    ) as served:
        yield served


def previewed(console: Console, approval_id: str) -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        body: dict[str, Any] = console.rest("GET", f"/v1/approvals/{approval_id}", "vera").json()
        run = (body.get("preview") or {}).get("run") or {}
        return body if run.get("status") in ("done", "failed") else None

    return wait_for(ended, "the request's preview", 15)


def test_the_preview_shows_over_rest_the_cli_mcp_the_webhook_and_to_the_reviewer(
    console: Console, fake: FakeLLM, hooks: Receiver
) -> None:
    asked: list[str] = []

    def review(body: dict[str, Any]) -> Reply:
        asked.append(json.dumps(body, ensure_ascii=False))
        return Reply("It rotates two keys.\nDecision: approve")

    fake.add(review)
    approval_id = request(console, "rotate_keys")
    body = previewed(console, approval_id)
    run = body["preview"]["run"]
    assert run["status"] == "done"
    said = json.loads(run["result"])
    assert said["would_rotate"] == ["api-key-1", "api-key-2"]

    env = {"ONGRID_URL": console.url, "ONGRID_TOKEN": console.tokens["vera"]}
    shown = CliRunner().invoke(
        cli, ["approvals", "show", approval_id], env={**env, "ONGRID_DATA_DIR": None}
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["preview"]["run"] == run

    result = mcp_execution(console, body["execution_id"])
    assert result.structured_content is not None
    assert result.structured_content["preview"] == run
    sentence = result.content[-1]
    assert isinstance(sentence, types.TextContent)
    assert 'Its preview: {"would_rotate": ["api-key-1", "api-key-2"]' in sentence.text

    def told() -> dict[str, Any] | None:
        for hook in hooks.bodies():
            if hook["text"].startswith("Preview ready: rotate_keys"):
                return dict(hook)
        return None

    hook = wait_for(told, "the previewed webhook", 15)
    fields = dict(f["text"].split("\n", 1) for f in hook["blocks"][0]["fields"])
    line = fields["*Preview*"].strip("`")
    assert line.startswith('{"would_rotate": ["api-key-1", "api-key-2"], "note": "password=')
    assert len(line) == PREVIEW_RESULT_CHARS and line.endswith("…")
    assert "hunter2" not in json.dumps(hook)

    wait_for(lambda: asked, "the reviewer's request", 15)
    [prompt] = asked
    assert 'Preview:\\n{\\"would_rotate\\": [\\"api-key-1\\", \\"api-key-2\\"]' in prompt
    assert "hunter2" not in prompt


def test_a_failed_preview_says_so_on_the_request_page_and_the_request_stands(
    console: Console,
) -> None:
    approval_id = request(console, "purge_queue")
    body = previewed(console, approval_id)
    assert body["preview"]["run"]["status"] == "failed" and body["status"] == "pending"
    with console.logged_in("olga") as client:
        page = client.get(f"/approvals/{approval_id}")
    assert page.status_code == 200, page.text
    assert "Preview failed (exit_status): exit status 4." in page.text
    assert "The request stands as it is: decide without it." in page.text
    assert "no inventory" in page.text  # its stderr, as the skill said it


def test_the_chat_card_shows_the_preview_of_the_runs_request(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(Reply("Purging.", [call("purge_queue", {})]))
    run_id, approval_id = run_request(console, "responder", "purge it")
    previewed(console, approval_id)
    with console.logged_in("olga") as client:
        card = client.get(f"/chat/{run_id}/approvals/{approval_id}")
    assert card.status_code == 200, card.text
    assert "Preview failed (exit_status): exit status 4." in card.text
    assert f'data-approval="{approval_id}"' in card.text


def test_the_inbox_card_shows_the_preview_when_it_lands_live(
    console: Console, browser: Browser, page_guard: PageGuard
) -> None:
    gate = console.settings.external_dirs[0] + "/restart-web/gate"
    page = watched_page(browser, page_guard)
    try:
        login(page, console, "admin")
        page.goto(console.url + "/approvals")
        expect(page.locator('[data-part="approvals-live"]')).to_have_attribute("data-live", "ready")
        approval_id = request(console, "restart_web")
        card = page.locator(f"#approval-{approval_id}")
        expect(card.locator(".run-preview")).to_contain_text("running the skill's dry run")
        Path(gate).touch()
        expect(card.locator(".preview-result")).to_contain_text(
            '"would_restart": ["web-1", "web-2"]'
        )
        expect(card.get_by_role("button", name="Approve")).to_be_visible()  # still theirs
    finally:
        Path(gate).touch()
        page.context.close()
    assert not page_guard.unexpected(), page_guard.unexpected()
