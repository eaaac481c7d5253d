"""Failures (SPEC §17): a worker killed, restarted or frozen mid-call, and the NATS server
restarted mid-call. Nothing runs twice, and nothing stays ``running``: real worker processes,
a real NATS server, and a mutating skill that appends one line per run to a file."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import TTL, Fleet, WorkerProcess, consumer, host_skill
from tests.support.processes import alive, read_pid
from tests.support.proxy import Proxy
from tests.support.server import Server, running_app
from tests.support.waiting import wait_for

#: A time as the records show it.
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """Where the skill leaves its traces: ``runs.log`` (a line per run), ``pid``, ``go``."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


@pytest.fixture
def skills(tmp_path: Path, work: Path) -> Path:
    root = tmp_path / "worker-skills"
    body = (
        f"echo ran >> {work}/runs.log\necho $$ > {work}/pid\n"
        f"while [ ! -e {work}/go ]; do sleep 0.02; done\necho '{{\"done\": true}}'"
    )
    host_skill(root, "append_once", body, **{"class": "mutating"})
    return root


def manager_for(fleet: Fleet, skills_root: Path) -> Any:
    return running_app(fleet.manager_settings(skills_root))


def offered(server: Server) -> bool:
    body = server.call("GET", "/v1/skills/append_once", "vera")
    return body.status_code == 200 and body.json()["schema"]["properties"]["host"]["enum"] == [
        "alpha"
    ]


def start_call(server: Server, work: Path) -> str:
    response = server.call(
        "POST", "/v1/skills/append_once/execute", "olga",
        json={"args": {"host": "alpha"}, "confirm": True, "wait": False},
    )  # fmt: skip
    assert response.status_code in (200, 202), response.text
    wait_for(lambda: read_pid(work / "pid"), "the skill to start on the host")
    return str(response.json()["id"])


def runs(work: Path) -> int:
    log = work / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def ask(server: Server, work: Path) -> str:
    """Start a call of append_once on alpha without waiting for the host to take it."""
    response = server.call(
        "POST", "/v1/skills/append_once/execute", "olga",
        json={"args": {"host": "alpha"}, "confirm": True, "wait": False},
    )  # fmt: skip
    assert response.status_code in (200, 202), response.text
    return str(response.json()["id"])


def back_and_idle(server: Server) -> bool:
    (host,) = server.call("GET", "/v1/hosts", "vera").json()["items"]
    return bool(host["online"] and host["running_calls"] == 0)


def freeze_while_it_waits_for_calls(fleet: Fleet, worker: WorkerProcess) -> float:
    """SIGSTOP the worker while its request for the next call is open at the server (a call
    published now is delivered into the frozen process); when the freeze came between two
    requests, resume it and try again. Returns when it froze (monotonic)."""
    for _ in range(5):
        wait_for(lambda: consumer(fleet.nats.url, fleet.prefix, "alpha").waiting >= 1, "a fetch")
        worker.proc.send_signal(signal.SIGSTOP)
        frozen = time.monotonic()
        if consumer(fleet.nats.url, fleet.prefix, "alpha").waiting >= 1:
            return frozen
        worker.proc.send_signal(signal.SIGCONT)
    raise AssertionError("the worker never froze with a request for calls open")


@pytest.fixture
def manager(fleet: Fleet, skills_root: Path) -> Iterator[Server]:
    with manager_for(fleet, skills_root) as server:
        yield server


def test_a_worker_killed_mid_call_makes_it_interrupted_within_the_ttl(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    worker = fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill")
    execution = start_call(manager, work)
    child = read_pid(work / "pid")
    assert child is not None
    killed = time.monotonic()
    worker.stop(signal.SIGKILL)
    done = manager.final(execution, timeout=TTL + 15)
    assert time.monotonic() - killed < TTL + 5  # TTL, plus a loaded machine's lag
    assert done["status"] == "interrupted", done
    assert "went offline" in done["error"]["message"]
    wait_for(lambda: not alive(child), "the call's process to die with its worker")
    assert runs(work) == 1


def test_a_worker_restarted_mid_call_never_runs_the_call_again(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    worker = fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill")
    execution = start_call(manager, work)
    worker.stop(signal.SIGKILL)
    again = fleet.worker("alpha", skills)  # the same host id and state dir, a new instance
    done = manager.final(execution, timeout=TTL + 15)
    assert done["status"] == "interrupted", done
    assert "restarted" in done["error"]["message"] or "offline" in done["error"]["message"]
    again.wait_line("was running when this worker stopped: not run again")
    (work / "go").touch()
    assert runs(work) == 1
    # The host works on, and the next call runs (once).
    (work / "pid").unlink()
    second = start_call(manager, work)
    assert manager.final(second)["status"] == "succeeded"
    assert runs(work) == 2


def test_a_host_frozen_after_it_took_the_call_is_interrupted_within_the_ttl_saying_when(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    worker = fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill")
    execution = start_call(manager, work)
    worker.proc.send_signal(signal.SIGSTOP)  # cut off: no heartbeat, the call goes on
    frozen = time.monotonic()
    try:
        done = manager.final(execution, timeout=TTL + 15)
        assert time.monotonic() - frozen < TTL + 3  # TTL, plus a loaded machine's lag
    finally:
        worker.proc.send_signal(signal.SIGCONT)
    assert done["status"] == "interrupted", done
    assert done["error"]["code"] == "interrupted"
    message = done["error"]["message"]
    assert re.fullmatch(
        rf"host alpha took the call at {ISO} and then went offline: "
        rf"no heartbeat for {TTL} s since {ISO}",
        message,
    ), message
    (work / "go").touch()  # the call ends on the host; its outcome comes back late
    wait_for(lambda: back_and_idle(manager), "alpha to be back and idle")
    after = manager.call("GET", f"/v1/executions/{execution}", "vera").json()
    assert after["status"] == "interrupted" and after["result"] is None
    assert after["error"]["message"] == message
    assert runs(work) == 1


def test_a_host_frozen_as_the_call_reached_it_is_interrupted_within_the_ttl_not_late(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    worker = fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill")
    frozen = freeze_while_it_waits_for_calls(fleet, worker)
    try:
        execution = ask(manager, work)
        wait_for(
            lambda: consumer(fleet.nats.url, fleet.prefix, "alpha").unacknowledged == 1,
            "NATS to deliver the call to the frozen worker",
        )
        # Before: it waited for the call's expiry plus the clock skew allowed (TTL + 32 s).
        done = manager.final(execution, timeout=TTL + 15)
        assert time.monotonic() - frozen < TTL + 3
    finally:
        worker.proc.send_signal(signal.SIGCONT)
    assert done["status"] == "interrupted", done
    assert done["error"]["code"] == "interrupted"
    message = done["error"]["message"]
    assert re.fullmatch(
        rf"host alpha went offline: no heartbeat for {TTL} s since {ISO}, after the call sent "
        rf"at {ISO} was delivered to it and before it confirmed taking it: it runs the call if "
        rf"it resumes before the call expires at {ISO} \(by its clock\); what it reports then "
        "is ignored",
        message,
    ), message
    # Resumed, it runs the call (or refuses it, expired by then) and reports: ignored.
    (work / "go").touch()
    wait_for(
        lambda: runs(work) == 1 or f"refused call {execution}" in worker.text(),
        "the resumed worker to run the call or refuse it",
    )
    wait_for(lambda: back_and_idle(manager), "alpha to be back and idle")
    after = manager.call("GET", f"/v1/executions/{execution}", "vera").json()
    assert after["status"] == "interrupted" and after["result"] is None
    assert after["error"]["message"] == message
    assert runs(work) <= 1


def test_a_call_sent_to_a_host_that_just_died_fails_within_the_ttl_and_never_runs(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    worker = fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill")
    worker.stop(signal.SIGKILL)  # its last heartbeat still says online
    died = time.monotonic()
    execution = ask(manager, work)
    done = manager.final(execution, timeout=TTL + 15)
    assert time.monotonic() - died < TTL + 3
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "host_offline"
    assert re.fullmatch(
        rf"host alpha went offline: no heartbeat for {TTL} s since {ISO}, before it took the "
        rf"call sent at {ISO}: not run",
        done["error"]["message"],
    ), done["error"]["message"]
    # The host comes back: the call was withdrawn, so the next call is the only one it runs.
    fleet.worker("alpha", skills)
    wait_for(lambda: offered(manager), "the skill again")
    second = start_call(manager, work)
    (work / "go").touch()
    assert manager.final(second)["status"] == "succeeded"
    assert runs(work) == 1


def test_the_nats_server_restarted_mid_call_runs_it_exactly_once(
    private_fleet: Fleet, skills: Path, skills_root: Path, work: Path
) -> None:
    worker = private_fleet.worker("alpha", skills)
    with manager_for(private_fleet, skills_root) as manager:
        wait_for(lambda: offered(manager), "the skill")
        execution = start_call(manager, work)
        private_fleet.nats.restart()
        worker.wait_line("reconnected to NATS")
        (work / "go").touch()
        done = manager.final(execution, timeout=30)
        assert done["status"] == "succeeded", done
        assert done["result"] == {"done": True}
        assert runs(work) == 1
        # The bus is whole again: the next call runs too, once.
        (work / "pid").unlink()
        second = start_call(manager, work)
        assert manager.final(second)["status"] == "succeeded"
    assert runs(work) == 2


def test_a_worker_cut_off_from_the_bus_stops_the_call_the_manager_recorded_interrupted(
    fleet: Fleet, skills: Path, manager: Server, work: Path
) -> None:
    proxy = Proxy(fleet.nats.port)  # the worker's only way to the bus
    try:
        worker = fleet.worker("alpha", skills, ONGRID_NATS_URL=f"nats://127.0.0.1:{proxy.port}")
        wait_for(lambda: offered(manager), "the skill")
        execution = start_call(manager, work)
        child = read_pid(work / "pid")
        assert child is not None
        proxy.close()  # the network between the host and the bus is gone
        done = manager.final(execution, timeout=TTL + 15)
        assert done["status"] == "interrupted", done
        worker.wait_line("cut off from the bus longer than the TTL; stopped")
        wait_for(lambda: not alive(child), "the host to stop the call itself")
        assert runs(work) == 1
    finally:
        proxy.close()
