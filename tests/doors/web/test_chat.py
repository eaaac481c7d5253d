"""The console's chat over plain HTTP against the real served app and a scripted LLM on
loopback: who may use which persona, stop and continue, the approval cards' buttons (the run's
starter confirms a mutating call, never signs a dangerous one, and the desk refuses it too), and
a hostile model and skill output shown as text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ongrid_skills.doors.stream_guard import RECHECK_SECONDS, TICK_SECONDS
from ongrid_skills.types import Role
from tests.support.browser import Console, csrf_of
from tests.support.chat_console import chat_console
from tests.support.hostile import HOSTILE_TEXT
from tests.support.llm import FakeLLM, Reply, call
from tests.support.sse import StreamWatch
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Console]:
    with chat_console(tmp_path_factory.mktemp("console"), fake) as served:
        yield served


SSE = {"accept": "text/event-stream"}
#: How long after its session ended a stream may go on (docs/security.md).
BOUND = RECHECK_SECONDS + TICK_SECONDS


def run_of(console: Console, run_id: str) -> dict[str, Any]:
    body: dict[str, Any] = console.rest("GET", f"/v1/agent/runs/{run_id}", "vera").json()
    return body


def ended(console: Console, run_id: str, status: str = "done") -> dict[str, Any]:
    return wait_for(
        lambda: (body := run_of(console, run_id))["status"] == status and body,
        f"the run to be {status}",
    )


def start(client: httpx.Client, persona: str, message: str) -> str:
    csrf = csrf_of(client.get("/chat").text)
    answer = client.post("/chat", data={"csrf": csrf, "persona": persona, "message": message})
    assert answer.status_code == 303, answer.text
    match = re.fullmatch(r"/chat/([0-9a-f]{32})", answer.headers["location"])
    assert match, answer.headers["location"]
    return match.group(1)


def post(client: httpx.Client, path: str, page: str, **data: str) -> httpx.Response:
    return client.post(path, data={"csrf": csrf_of(client.get(page).text), **data})


def options(html: str) -> list[str]:
    return re.findall(r'<option value="([^"]+)"', html)


def test_a_viewer_may_chat_with_read_only_personas_only(console: Console) -> None:
    with console.logged_in("vera") as vera, console.logged_in("olga") as olga:
        page = vera.get("/chat")
        assert page.status_code == 200
        assert '<a href="/chat" aria-current="page">Chat</a>' in page.text
        assert "default" in options(page.text) and "reader" in options(page.text)
        assert "responder" not in options(page.text) and "commander" not in options(page.text)
        refused = post(vera, "/chat", "/chat", persona="responder", message="restart it")
        assert refused.status_code == 403
        assert "may not use persona responder (mutating-with-confirm)" in refused.text
        assert {"responder", "commander"} <= set(options(olga.get("/chat").text))
        assert 'href="/chat?persona=reader">Chat as reader</a>' in vera.get("/personas/reader").text
        assert "Chat as responder" not in vera.get("/personas/responder").text
        assert '<option value="reader" selected>' in vera.get("/chat?persona=reader").text
        blank = post(olga, "/chat", "/chat", persona="default", message="   ")
        assert blank.status_code == 400
        assert post(olga, "/chat", "/chat", persona="ghost", message="hi").status_code == 404
        no_csrf = olga.post("/chat", data={"persona": "default", "message": "hi"})
        assert no_csrf.status_code == 403


def test_hostile_model_and_skill_output_is_shown_as_text_folded_and_indented(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(Reply(HOSTILE_TEXT, [call("hostile_dump")]), Reply("All <b>fine</b>."))
    with console.logged_in("olga") as olga:
        run_id = start(olga, "default", "dump <it>")
        ended(console, run_id)
        page = olga.get(f"/chat/{run_id}").text
        assert "<img" not in page and "<script>alert" not in page and "<b>" not in page
        assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page
        assert "\\x1b[31mred\\u202eevil" in page  # the controls as visible escapes
        assert "\x1b" not in page and "\u202e" not in page
        assert "dump &lt;it&gt;" in page and "All &lt;b&gt;fine&lt;/b&gt;." in page
        fold = page[page.index('<details class="fold">') :]
        assert re.match(r'<details class="fold">\s*<summary>Result \(\d+ lines, JSON\)', fold)
        assert "  &#34;rows&#34;: [\n    {\n      &#34;n&#34;: 0," in fold  # indented
        assert "\\u001b[2J" in fold  # JSON's own escape, as the skill wrote it
        stream = olga.get(f"/chat/{run_id}/events").text
    kinds = re.findall(r"^event: (\S+)", stream, re.MULTILINE)
    assert kinds[0] == "message" and kinds[-2:] == ["done", "end"]
    assert {"text_delta", "tool_start", "tool_end"} <= set(kinds)
    datas = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: ")]
    ends = [d for d in datas if d.get("type") == "tool_end"]
    assert ends[0]["tool"] == "hostile_dump" and ends[0]["status"] == "succeeded"
    assert ends[0]["duration_ms"] >= 0


def test_a_run_is_stopped_by_its_requester_and_continued_by_them_only(
    console: Console, fake: FakeLLM, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    fake.add(Reply("Waiting on it.", [call("gated_wait", {"gate": str(gate)})]))
    with console.logged_in("olga") as olga, console.logged_in("vera") as vera:
        run_id = start(olga, "default", "wait for the gate")
        wait_for(lambda: "tool_start" in _kinds(console, run_id), "the call to start")
        page = olga.get(f"/chat/{run_id}").text
        assert f'action="/chat/{run_id}/stop"' in page and "/send" not in page
        assert f'action="/chat/{run_id}/stop"' not in vera.get(f"/chat/{run_id}").text
        here = f"/chat/{run_id}"
        assert post(vera, f"/chat/{run_id}/stop", here).status_code == 403
        stopped = post(olga, f"/chat/{run_id}/stop", here)
        assert stopped.status_code == 303 and stopped.headers["location"] == here
        assert run_of(console, run_id)["status"] == "cancelled"
        page = olga.get(here).text
        assert f'action="/chat/{run_id}/send"' in page and "/stop" not in page
        assert "Only olga, who started it, may continue" in vera.get(here).text
        assert post(vera, f"/chat/{run_id}/send", here, message="go on").status_code == 403
        fake.add(Reply("Carrying on."))
        assert post(olga, f"/chat/{run_id}/send", here, message="go on").status_code == 303
        body = ended(console, run_id)
        assert body["final_answer"] == "Carrying on."
        listed = olga.get("/chat").text
        assert f'href="/chat/{run_id}"' in listed
        assert f'href="/chat/{run_id}"' not in vera.get("/chat").text  # one's own runs


def _kinds(console: Console, run_id: str) -> list[str]:
    return [e.type for _seq, e in console.app.state.agents.runs.events(run_id)]


def pending_of(console: Console, run_id: str) -> Any:
    found = [
        a
        for a in console.store.approvals.query(status="pending", limit=500)
        if a.requested_by == f"agent:{run_id}"
    ]
    return found[0] if found else None


def test_the_starter_confirms_a_mutating_call_on_its_card_but_signs_no_dangerous_one(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(Reply("Restarting.", [call("restart_cache")]), Reply("Restarted."))
    with console.logged_in("olga") as olga:
        run_id = start(olga, "responder", "restart the cache")
        approval = wait_for(lambda: pending_of(console, run_id), "the request")
        card = olga.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert "Waiting for a confirmation (0 of 1)" in card
        assert 'class="approve"' in card and ">Confirm</button>" in card
        assert f'name="next" value="chat:{run_id}"' in card
        here = f"/chat/{run_id}"
        confirmed = post(olga, f"/approvals/{approval.id}/approve", here, next=f"chat:{run_id}")
        assert confirmed.status_code == 303
        assert confirmed.headers["location"] == f"/chat/{run_id}#approval-{approval.id}"
        assert ended(console, run_id)["final_answer"] == "Restarted."
        assert "Approved" in olga.get(f"/chat/{run_id}/approvals/{approval.id}").text

    fake.add(Reply("Wiping.", [call("wipe_scratch")]))  # stopped while it waits
    with console.logged_in("admin") as ada, console.logged_in("admin2") as bob:
        run_id = start(ada, "commander", "wipe the scratch disk")
        approval = wait_for(lambda: pending_of(console, run_id), "the request")
        card = ada.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert "Waiting for 2 signatures (0 of 2)" in card
        assert 'class="approve"' not in card
        assert "nobody signs a dangerous call of their own agent run" in card
        inbox = ada.get(f"/approvals/{approval.id}").text
        assert 'class="approve"' not in inbox  # nor in the inbox
        refused = post(ada, f"/approvals/{approval.id}/approve", "/approvals")
        assert refused.status_code == 403
        assert 'class="approve"' in bob.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert post(bob, f"/approvals/{approval.id}/approve", "/approvals").status_code == 303
        card = ada.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert "Waiting for 1 signature (1 of 2)" in card and "<strong>admin2</strong>" in card
        other = ada.get(f"/chat/{'0' * 32}/approvals/{approval.id}")
        assert other.status_code == 404
        here = f"/chat/{run_id}"
        assert post(ada, f"/chat/{run_id}/stop", here).status_code == 303
        ended(console, run_id, "cancelled")
        card = ada.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert f"Cancelled: cancelled by agent:{run_id}" in card and "Waiting for" not in card


def test_a_rejection_in_the_inbox_shows_on_the_chat_card_and_the_model_is_told(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(Reply("Restarting.", [call("restart_cache")]), Reply("Understood, left alone."))
    with console.logged_in("olga") as olga, console.logged_in("oscar") as oscar:
        run_id = start(olga, "responder", "restart the cache")
        approval = wait_for(lambda: pending_of(console, run_id), "the request")
        rejected = post(
            oscar, f"/approvals/{approval.id}/reject", "/approvals", comment="<not now>"
        )
        assert rejected.status_code == 303
        assert ended(console, run_id)["final_answer"] == "Understood, left alone."
        page = olga.get(f"/chat/{run_id}").text
    card = page[page.index('<div class="chat-card') :]
    assert 'data-status="rejected"' in card and "Rejected: &lt;not now&gt;" in card
    assert "Waiting for" not in card and 'class="approve"' not in card
    assert '<span class="call-status">rejected</span>' in page
    assert "&#34;code&#34;: &#34;rejected&#34;" in page  # the envelope the model was given
    told = fake.request(-1)["messages"][-1]
    assert told["role"] == "tool" and json.loads(told["content"])["error"]["code"] == "rejected"


def test_an_expired_request_shows_on_the_chat_card_and_the_model_is_told(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(Reply("Restarting.", [call("restart_cache")]), Reply("It expired; not restarted."))
    with console.logged_in("olga") as olga:
        run_id = start(olga, "responder", "restart the cache")
        approval = wait_for(lambda: pending_of(console, run_id), "the request")
        with console.store.tx() as conn:  # its time is up (as if an hour went by)
            conn.execute(
                text("UPDATE approvals SET expires_at = 0 WHERE id = :id"), {"id": approval.id}
            )
        card = olga.get(f"/chat/{run_id}/approvals/{approval.id}").text
        assert 'data-status="expired"' in card and "Expired: the request expired" in card
        assert 'class="approve"' not in card and "Waiting for" not in card
        assert ended(console, run_id)["final_answer"] == "It expired; not restarted."
        page = olga.get(f"/chat/{run_id}").text
    assert '<span class="call-status">expired</span>' in page
    told = fake.request(-1)["messages"][-1]
    assert json.loads(told["content"])["error"]["code"] == "expired"


def test_revoking_the_token_ends_the_chat_stream_with_unauthorized_and_the_run_goes_on(
    console: Console, fake: FakeLLM, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    fake.add(Reply("Waiting.", [call("gated_wait", {"gate": str(gate)})]), Reply("Opened."))
    token, info = console.store.tokens.create("rhea-chat", Role.VIEWER)
    console.tokens["rhea-chat"] = token
    try:
        with console.logged_in("rhea-chat") as rhea:
            run_id = start(rhea, "default", "wait for the gate")
            watch = StreamWatch(rhea, f"/chat/{run_id}/events", headers=SSE)
            watch.start()
            watch.wait_event("stderr")
            console.store.tokens.revoke(info.id)
            assert watch.closed.wait(BOUND + 3.0), watch.kinds()
            last = watch.events[-1][1]
            assert last.event == "error" and last.json()["error"]["code"] == "unauthorized"
            assert "done" not in watch.kinds()
    finally:
        gate.touch()
    assert ended(console, run_id)["final_answer"] == "Opened."
