"""Edge workers across a real network (SPEC §17): each worker process in a network namespace of
its own, reaching a NATS server bound to the root side of its veth link — never loopback.

The skills prove where they ran (the addresses of the namespace they see); pulling a host's
cable mid-call (its side of the link set down) shows the heartbeat TTL at work across a network
that silently drops packets, where no connection is refused or reset. Skipped without
``ip netns``, except in CI as root (:mod:`tests.support.netns`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import TTL, Spy, host_skill
from tests.support.netns import NetnsFleet, ip_binary
from tests.support.processes import read_pid
from tests.support.server import Server, running_app
from tests.support.waiting import wait_for


@pytest.fixture
def manager(netns_fleet: NetnsFleet, skills_root: Path) -> Iterator[Server]:
    with running_app(netns_fleet.fleet.manager_settings(skills_root)) as server:
        yield server


def offered(server: Server, name: str) -> list[str]:
    response = server.call("GET", f"/v1/skills/{name}", "vera")
    if response.status_code != 200:
        return []
    hosts: list[str] = response.json()["schema"]["properties"]["host"]["enum"]
    return hosts


def execute(server: Server, name: str, host: str, **body: Any) -> Any:
    response = server.call(
        "POST", f"/v1/skills/{name}/execute", "olga", json={"args": {"host": host}, **body}
    )
    assert response.status_code in (200, 202), response.text
    return response.json()


def hosts_online(server: Server) -> dict[str, bool]:
    items = server.call("GET", "/v1/hosts", "vera").json()["items"]
    return {h["host"]: h["online"] for h in items}


def test_a_call_routed_to_each_host_runs_in_that_hosts_network_namespace(
    netns_fleet: NetnsFleet, tmp_path: Path, manager: Server
) -> None:
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", f"printf '{{\"addrs\": %s}}' \"$({ip_binary()} -j -4 addr)\"")
    ns = netns_fleet.network.namespaces
    netns_fleet.worker(0, "alpha", skills)
    netns_fleet.worker(1, "beta", skills)
    wait_for(lambda: offered(manager, "where_am_i") == ["alpha", "beta"], "both hosts")
    for host, where in (("alpha", ns[0]), ("beta", ns[1]), ("alpha", ns[0])):
        done = execute(manager, "where_am_i", host)
        assert done["status"] == "succeeded", done
        seen = {a["local"] for link in done["result"]["addrs"] for a in link["addr_info"]}
        assert seen == {"127.0.0.1", where.address}  # that host's network, nobody else's
    # Each worker's connection reached the server from its namespace's address, over its link.
    came_from = {
        c.get("name"): c["ip"] for c in netns_fleet.nats.connections() if c.get("name")
    }
    assert came_from["ongrid-skills worker alpha"] == ns[0].address
    assert came_from["ongrid-skills worker beta"] == ns[1].address


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """Where the skill leaves its traces: ``runs.log`` (a line per run), ``pid``, ``go``."""
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def test_a_host_whose_link_is_cut_mid_call_is_interrupted_and_never_runs_it_again(
    netns_fleet: NetnsFleet, tmp_path: Path, work: Path, manager: Server
) -> None:
    skills = tmp_path / "worker-skills"
    body = (
        f"echo ran >> {work}/runs.log\necho $$ > {work}/pid\n"
        f"while [ ! -e {work}/go ]; do sleep 0.02; done\necho '{{\"done\": true}}'"
    )
    host_skill(skills, "append_once", body, **{"class": "mutating"})
    alpha = netns_fleet.worker(0, "alpha", skills)
    netns_fleet.worker(1, "beta", skills)
    wait_for(lambda: offered(manager, "append_once") == ["alpha", "beta"], "both hosts")
    spy = Spy(netns_fleet.nats.url, f"{netns_fleet.fleet.prefix}.event.>")
    try:
        execution = execute(manager, "append_once", "alpha", confirm=True, wait=False)["id"]
        wait_for(lambda: read_pid(work / "pid"), "the skill to start on alpha")
        link = netns_fleet.network.namespaces[0]
        link.cut()
        cut = time.monotonic()
        done = manager.final(execution, timeout=TTL + 5)
        assert time.monotonic() - cut < TTL + 3
        assert done["status"] == "interrupted", done
        assert "went offline" in done["error"]["message"]
        assert hosts_online(manager) == {"alpha": False, "beta": True}  # only alpha's link

        link.mend()
        (work / "go").touch()  # the call ends on alpha; its outcome crosses the mended link

        def late_outcome() -> dict[str, Any] | None:
            for data, headers in list(spy.messages):
                message = json.loads(data)
                if headers.get("Nats-Msg-Id", "").startswith(execution + ":") and (
                    message["type"] == "outcome"
                ):
                    return dict(message["data"])
            return None

        assert wait_for(late_outcome, "alpha's late outcome on the bus", 20)["status"] == (
            "succeeded"
        )
        wait_for(lambda: hosts_online(manager)["alpha"], "alpha to be back online")
        # A second call on alpha, read after the late outcome (one stream, read in order).
        (work / "pid").unlink()
        second = execute(manager, "append_once", "alpha", confirm=True)
        assert second["status"] == "succeeded", second
    finally:
        spy.close()
    after = manager.call("GET", f"/v1/executions/{execution}", "vera").json()
    assert after["status"] == "interrupted" and after["result"] is None  # the late one ignored
    assert (work / "runs.log").read_text().splitlines() == ["ran", "ran"]  # once each
    assert alpha.proc.poll() is None
