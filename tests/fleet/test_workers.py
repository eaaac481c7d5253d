"""Edge workers (SPEC §17): real `ongrid-skills worker` processes, a real NATS server, and the
manager's app on a real store; calls routed to the host they name, and what comes back."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.skills.registry import Registry
from tests.support.fleet import ANNOUNCED, Fleet, host_skill
from tests.support.processes import alive, read_pid
from tests.support.server import Server, running_app
from tests.support.waiting import wait_for

WHERE = 'echo "{\\"tag\\": \\"$WORKER_TAG\\", \\"args\\": $ARGS}"'


@pytest.fixture
def worker_skills(tmp_path: Path) -> Path:
    """The skills every worker of these tests has (one skills dir, as deployed everywhere)."""
    root = tmp_path / "worker-skills"
    host_skill(root, "where_am_i", WHERE, env_allow=["WORKER_TAG"], schema={"type": "object"})
    return root


@pytest.fixture
def manager(fleet: Fleet, skills_root: Path) -> Iterator[Server]:
    with running_app(fleet.manager_settings(skills_root)) as server:
        yield server


def offered_hosts(server: Server, name: str) -> list[str]:
    body = server.call("GET", f"/v1/skills/{name}", "vera").json()
    hosts: list[str] = body["schema"]["properties"]["host"]["enum"]
    return hosts


def run(server: Server, name: str, args: dict[str, Any], who: str = "olga", **body: Any) -> Any:
    response = server.call("POST", f"/v1/skills/{name}/execute", who, json={"args": args, **body})
    assert response.status_code in (200, 202), response.text
    return response.json()


def test_a_call_goes_to_the_host_it_names_on_two_worker_processes(
    fleet: Fleet, worker_skills: Path, manager: Server
) -> None:
    alpha = fleet.worker("alpha", worker_skills, wait=False, WORKER_TAG="A")  # side by side
    fleet.worker("beta", worker_skills, WORKER_TAG="B")
    alpha.wait_line(ANNOUNCED)
    wait_for(lambda: offered_hosts(manager, "where_am_i") == ["alpha", "beta"], "both hosts")
    listed = manager.call("GET", "/v1/skills", "vera").json()
    assert [s["name"] for s in listed["items"]] == ["where_am_i"]  # offered once
    for host, tag in (("alpha", "A"), ("beta", "B"), ("alpha", "A")):
        done = run(manager, "where_am_i", {"host": host, "n": 1})
        assert done["status"] == "succeeded", done
        assert done["result"] == {"tag": tag, "args": {"n": 1}}  # the host argument stays here
        assert done["args"] == {"host": host, "n": 1}


def test_hosts_are_listed_with_labels_skills_and_heartbeat_and_metrics_per_host(
    fleet: Fleet, worker_skills: Path, manager: Server
) -> None:
    fleet.worker("alpha", worker_skills, "env=prod", "rack=r1", WORKER_TAG="A")
    wait_for(lambda: manager.call("GET", "/v1/hosts", "vera").json()["total"] == 1, "the host")
    body = manager.call("GET", "/v1/hosts", "vera").json()
    assert body["fleet"]["prefix"] == fleet.prefix
    (host,) = body["items"]
    assert host["host"] == "alpha" and host["online"] is True
    assert host["labels"] == {"env": "prod", "rack": "r1"}
    assert host["skill_count"] == 1 and list(host["skills"]) == ["where_am_i"]
    assert host["last_heartbeat"].endswith("Z") and host["version"]
    run(manager, "where_am_i", {"host": "alpha"})
    metrics = manager.call("GET", "/metrics").text
    assert 'ongrid_host_online{host="alpha"} 1.0' in metrics
    assert 'ongrid_host_calls_total{host="alpha",status="succeeded"} 1.0' in metrics
    assert 'ongrid_host_skills{host="alpha"} 1.0' in metrics


def test_the_offer_follows_the_hosts_and_listeners_hear_each_change(
    fleet: Fleet, worker_skills: Path, manager: Server
) -> None:
    heard: list[list[str]] = []
    lock = threading.Lock()

    def listener(registry: Registry) -> None:
        skill = registry.skills.get("where_am_i")
        with lock:
            heard.append(skill.schema["properties"]["host"]["enum"] if skill else [])

    manager.manager.reload_listeners.append(listener)  # what MCP's list_changed hangs on
    alpha = fleet.worker("alpha", worker_skills, WORKER_TAG="A")
    wait_for(lambda: ["alpha"] in heard, "the listeners to hear alpha")
    fleet.worker("beta", worker_skills, WORKER_TAG="B")
    wait_for(lambda: ["alpha", "beta"] in heard, "the listeners to hear beta")
    alpha.stop()  # a clean stop deletes its entry: offline at once
    wait_for(lambda: heard[-1] == ["beta"], "the listeners to hear alpha leave")
    assert offered_hosts(manager, "where_am_i") == ["beta"]
    hosts = manager.call("GET", "/v1/hosts", "vera").json()["items"]
    assert [(h["host"], h["online"]) for h in hosts] == [("beta", True), ("alpha", False)]


def test_stderr_and_progress_stream_back_live(
    fleet: Fleet, tmp_path: Path, manager: Server
) -> None:
    go = tmp_path / "go"
    body = (
        f'echo "warming up" >&2\necho \'{{"progress": 0.5}}\' >&2\n'
        f"while [ ! -e {go} ]; do sleep 0.02; done\necho '{{\"done\": true}}'"
    )
    skills = tmp_path / "live-skills"
    host_skill(skills, "slow_talker", body)
    fleet.worker("alpha", skills)
    wait_for(lambda: offered_hosts(manager, "slow_talker") == ["alpha"], "the skill")
    started = run(manager, "slow_talker", {"host": "alpha"}, wait=False)
    assert started["status"] == "running"

    def events() -> list[dict[str, Any]]:
        url = f"/v1/executions/{started['id']}/events?follow=false"
        text = manager.call("GET", url, "vera").text
        return [{"type": line[7:]} for line in text.splitlines() if line.startswith("event: ")]

    # The stderr line arrives while the call still runs (it waits for the test's go).
    wait_for(lambda: {"type": "stderr"} in events(), "the stderr event of the running call")
    assert manager.call("GET", f"/v1/executions/{started['id']}", "vera").json()["status"] == (
        "running"
    )
    go.touch()
    done = manager.final(started["id"])
    assert done["status"] == "succeeded" and done["result"] == {"done": True}
    kinds = [e["type"] for e in events()]
    assert kinds[:2] == ["dispatched", "accepted"] and "progress" in kinds


def test_cancel_kills_the_process_group_on_the_host(
    fleet: Fleet, tmp_path: Path, manager: Server
) -> None:
    pids = tmp_path / "pids"
    body = f"sleep 60 &\necho $$ > {pids}\necho $! >> {pids}\nwait"
    skills = tmp_path / "cancel-skills"
    host_skill(skills, "long_job", body)
    fleet.worker("alpha", skills)
    wait_for(lambda: offered_hosts(manager, "long_job") == ["alpha"], "the skill")
    started = run(manager, "long_job", {"host": "alpha"}, wait=False)
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, "the pids")
    shell, child = (int(p) for p in pids.read_text().split())
    assert read_pid(pids) == shell
    response = manager.call("POST", f"/v1/executions/{started['id']}/cancel", "olga")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    wait_for(lambda: not alive(shell) and not alive(child), "the host's process group to die")


def test_a_timeout_on_the_host_kills_the_call(
    fleet: Fleet, tmp_path: Path, manager: Server
) -> None:
    skills = tmp_path / "timeout-skills"
    host_skill(skills, "too_slow", "sleep 30", timeout_seconds=1)
    fleet.worker("alpha", skills)
    wait_for(lambda: offered_hosts(manager, "too_slow") == ["alpha"], "the skill")
    done = run(manager, "too_slow", {"host": "alpha"})
    assert done["status"] == "timed_out", done
    assert done["error"]["code"] == "timed_out"


def test_an_approval_binds_the_host_and_runs_there_once_signed(
    fleet: Fleet, tmp_path: Path, manager: Server
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    skills = tmp_path / "mutating-skills"
    host_skill(skills, "touch_mark", f"touch {marks}/$WORKER_TAG\necho '{{}}'",
               env_allow=["WORKER_TAG"], **{"class": "mutating"})  # fmt: skip
    alpha = fleet.worker("alpha", skills, wait=False, WORKER_TAG="A")  # side by side
    fleet.worker("beta", skills, WORKER_TAG="B")
    alpha.wait_line(ANNOUNCED)
    wait_for(lambda: offered_hosts(manager, "touch_mark") == ["alpha", "beta"], "both hosts")
    pending = run(manager, "touch_mark", {"host": "beta"})
    assert pending["status"] == "pending_approval"
    approval = manager.call("GET", f"/v1/approvals/{pending['approval_id']}", "admin").json()
    assert approval["args"] == {"host": "beta"}  # the host is part of what is signed
    signed = manager.call("POST", f"/v1/approvals/{approval['id']}/approve", "admin", json={})
    assert signed.status_code == 200, signed.text
    done = manager.final(pending["id"])
    assert done["status"] == "succeeded", done
    assert sorted(p.name for p in marks.iterdir()) == ["B"]


def metric(server: Server, line: str) -> float | None:
    """The value of one series of ``GET /metrics`` (``name{labels}``), or None when absent."""
    for row in server.call("GET", "/metrics").text.splitlines():
        if row.startswith(line + " "):
            return float(row.rsplit(" ", 1)[1])
    return None


def test_metrics_per_host_count_calls_by_status_time_them_and_follow_the_online_state(
    fleet: Fleet, tmp_path: Path, manager: Server
) -> None:
    skills = tmp_path / "metric-skills"
    host_skill(skills, "say_ok", "echo '{\"ok\": true}'")
    host_skill(skills, "break_down", "echo 'no' >&2\nexit 3")
    alpha = fleet.worker("alpha", skills, wait=False)  # side by side
    beta = fleet.worker("beta", skills)
    alpha.wait_line(ANNOUNCED)
    wait_for(lambda: offered_hosts(manager, "say_ok") == ["alpha", "beta"], "both hosts")
    for name in ("say_ok", "say_ok", "break_down"):
        run(manager, name, {"host": "alpha"})
    assert metric(manager, 'ongrid_host_calls_total{host="alpha",status="succeeded"}') == 2
    assert metric(manager, 'ongrid_host_calls_total{host="alpha",status="failed"}') == 1
    assert metric(manager, 'ongrid_host_call_duration_seconds_count{host="alpha"}') == 3
    assert metric(manager, 'ongrid_host_online{host="beta"}') == 1
    beta.stop(signal.SIGKILL)  # no clean stop: offline once its heartbeat is missed
    wait_for(lambda: metric(manager, 'ongrid_host_online{host="beta"}') == 0, "beta offline")
    refused = run(manager, "say_ok", {"host": "beta"})
    assert refused["status"] == "failed" and refused["error"]["code"] == "host_offline"
    assert metric(manager, 'ongrid_host_calls_total{host="beta",status="failed"}') == 1
    assert metric(manager, 'ongrid_host_call_duration_seconds_count{host="beta"}') is None
    # A host name no worker ever announced is the caller's text: it gets no series.
    assert run(manager, "say_ok", {"host": "nowhere"})["error"]["code"] == "host_offline"
    assert 'host="nowhere"' not in manager.call("GET", "/metrics").text
