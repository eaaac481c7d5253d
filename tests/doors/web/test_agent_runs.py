"""Agent runs in the console over plain HTTP, with a scripted LLM on loopback: the request of a
run's tool call shows the run and its last messages, the run list, and a run's transcript."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from markupsafe import escape

from tests.support.browser import Console, console_server
from tests.support.llm import FakeLLM, Reply, call, llm_settings
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[Console]:
    """The console of ``tests.support.browser`` whose agent talks to the scripted LLM."""
    llm = llm_settings(fake, llm_timeout_seconds=30)
    with console_server(tmp_path_factory.mktemp("console"), **llm) as served:
        yield served


def run_body(console: Console, run_id: str) -> dict[str, Any]:
    response = console.rest("GET", f"/v1/agent/runs/{run_id}", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def start(console: Console, message: str, persona: str = "responder") -> str:
    response = console.rest(
        "POST", "/v1/agent/runs", "olga", json={"persona": persona, "message": message}
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["id"]
    return run_id


def test_a_request_made_by_an_agent_run_shows_the_run_and_its_last_messages(
    console: Console, fake: FakeLLM
) -> None:
    fake.add(
        Reply("The cache is stale; restarting it.", [call("restart_cache", {"service": "c-1"})]),
        Reply("Restarted cache c-1."),
    )
    run_id = start(console, "Checkout is slow, the cache looks <stale>.")
    wait_for(lambda: run_body(console, run_id)["status"] == "waiting_approval", "the run to wait")
    (approval,) = console.store.approvals.query(status="pending", limit=500)
    assert approval.requested_by == f"agent:{run_id}"
    with console.logged_in("oscar") as client:
        page = client.get(f"/approvals/{approval.id}").text
        card = page[page.index('class="card') :]
        assert f'<a href="/agent/runs/{run_id}"><code>{run_id[:8]}</code></a>' in card
        assert "(persona responder, started by olga)" in card
        assert "Checkout is slow, the cache looks &lt;stale&gt;." in card
        assert "The cache is stale; restarting it." in card
        assert escape('calls restart_cache({"service": "c-1"})') in card
        answer = client.post(
            f"/approvals/{approval.id}/approve",
            data={"csrf": console.csrf(client, "/approvals"), "comment": "go"},
        )
        assert answer.status_code == 303
    final = wait_for(
        lambda: (b := run_body(console, run_id))["status"] == "done" and b, "the run to end"
    )
    assert final["final_answer"] == "Restarted cache c-1."

    with console.logged_in("vera") as client:
        listing = client.get("/agent/runs").text
        done = client.get("/agent/runs?status=done").text
        waiting = client.get("/agent/runs?status=waiting_approval").text
        page = client.get(f"/agent/runs/{run_id}").text
    assert f'href="/agent/runs/{run_id}"' in listing
    assert f'href="/agent/runs/{run_id}"' in done
    assert f'href="/agent/runs/{run_id}"' not in waiting
    transcript = page[page.index('<ol class="transcript">') :]
    roles = re.findall(r'<li class="role-(\w+)" id="message-\d+">', transcript)
    assert roles == [m["role"] for m in final["messages"]]
    assert roles == ["user", "assistant", "pending", "tool", "assistant"]
    tool = next(m for m in final["messages"] if m["role"] == "tool")
    assert escape(tool["content"]) in transcript  # what the model received, verbatim
    assert f'href="/executions/{tool["execution_id"]}"' in transcript
    assert f'href="/approvals/{approval.id}"' in transcript
    assert "&#34;service&#34;: &#34;c-1&#34;" in transcript  # the call's args, indented
    assert "Restarted cache c-1." in page
    assert "(persona responder, started by olga)" not in page  # that is the card's line


def test_bad_agent_run_queries_get_clear_pages(console: Console) -> None:
    with console.logged_in("vera") as client:
        answers = {
            "unknown": client.get("/agent/runs/0123456789abcdef0123456789abcdef").status_code,
            "bad status": client.get("/agent/runs?status=sleeping").status_code,
            "zero": client.get("/agent/runs?limit=0").status_code,
            "too many": client.get("/agent/runs?limit=501").status_code,
        }
    assert answers == {"unknown": 404, "bad status": 400, "zero": 400, "too many": 400}
