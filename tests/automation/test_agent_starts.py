"""Alerts and schedules that start agent runs, and their outcomes posted to the approval
webhooks' channels: a real ``serve`` with a scripted OpenAI-compatible model on loopback, the
example ``reporter`` persona, and a webhook receiver standing in for Slack."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.llm import API_KEY, FakeLLM, Reply
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import EXAMPLE_SKILLS, write_persona
from tests.support.waiting import wait_for
from tests.support.webhooks import Receiver, receiving

REPORT = "All good: / is 41 % full, nginx is up."


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def channel() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, llm: FakeLLM, channel: Receiver
) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("agents")
    personas = base / "personas"
    write_persona(personas, "responder", body="You diagnose alerts.")
    env = {
        "ONGRID_PERSONAS_DIRS": f"{EXAMPLE_SKILLS.parent / 'personas'}:{personas}",
        "ONGRID_LLM_BASE_URL": llm.url,
        "ONGRID_LLM_MODEL": "test-model",
        "ONGRID_LLM_API_KEY": API_KEY,
        "ONGRID_LLM_STREAM": "0",
        "ONGRID_APPROVAL_WEBHOOKS": channel.url,
        "ONGRID_BUNDLED_SKILLS": "1",
    }
    served = serve_for_cli(base, lambda _root: None, **env)
    try:
        yield served
    finally:
        stop(served.process)


def _run(served: Served, run_id: str) -> dict[str, Any]:
    def over() -> dict[str, Any] | None:
        body: dict[str, Any] = served.http("GET", f"/v1/agent/runs/{run_id}").json()
        return body if body["status"] not in ("running",) else None

    return wait_for(over, f"agent run {run_id} to end", 15)


def test_an_alert_starts_an_agent_run_whose_prompt_holds_the_alert_and_its_answer_is_posted(
    served: Served, llm: FakeLLM, channel: Receiver
) -> None:
    llm.add(Reply(text="Diagnosis: nginx on web-1 ran out of workers."))
    rule = {
        "name": "diagnose",
        "agent": {
            "persona": "responder",
            "prompt": "Diagnose {labels.alertname} on {labels.instance}.",
        },
        "notify": True,
    }
    answer = served.http("PUT", "/v1/triggers/ai", json={"role": "viewer", "rules": [rule]})
    token = answer.json()["token"]
    payload = {
        "labels": {"alertname": "HighLatency", "instance": "web-1"},
        "annotations": {"summary": "p99 above 2 s"},
    }
    delivered = httpx.post(
        f"{served.url}/v1/triggers/ai",
        json=payload,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    started = delivered.json()["started"]
    assert started[0]["kind"] == "run", delivered.text
    run = _run(served, started[0]["target_id"])
    assert run["requested_by"] == "trigger:ai" and run["role"] == "viewer", run
    sent = llm.wait_requests(1)[-1]
    user = next(m["content"] for m in sent["messages"] if m["role"] == "user")
    assert user.startswith("Diagnose HighLatency on web-1.")
    assert '"summary": "p99 above 2 s"' in user  # the alert itself, as data
    posted = wait_for(
        lambda: [b for b in channel.bodies() if "trigger:ai" in b.get("text", "")] or None,
        "the outcome in the channel",
    )
    assert "ran out of workers" in posted[0]["blocks"][0]["text"]["text"]


def test_run_now_of_a_reporter_schedule_starts_the_reporter_and_posts_its_report(
    served: Served, llm: FakeLLM, channel: Receiver
) -> None:
    llm.add(Reply(text=REPORT))
    doc = {
        "cron": "0 7 * * *",
        "timezone": "Europe/Paris",
        "agent": {"persona": "reporter", "prompt": "Daily disk and service report for nginx."},
        "notify": True,
    }
    assert served.http("PUT", "/v1/schedules/daily", json=doc).status_code == 201
    fired = served.http("POST", "/v1/schedules/daily/run").json()
    assert fired["kind"] == "run", fired
    run = _run(served, fired["target_id"])
    assert run["persona"] == "reporter" and run["final_answer"] == REPORT
    assert run["requested_by"] == "schedule:daily"
    offered = {t["function"]["name"] for t in llm.requests[-1].get("tools", [])}
    assert "disk_usage" in offered and "process_signal" not in offered
    posted = wait_for(
        lambda: [b for b in channel.bodies() if "schedule:daily" in b.get("text", "")] or None,
        "the report in the channel",
    )
    assert "41 % full" in posted[0]["blocks"][0]["text"]["text"]
    shown = served.http("GET", "/v1/schedules/daily", "olga").json()["recent"]
    assert shown[0]["how"] == "manual" and shown[0]["status"] == "done"
