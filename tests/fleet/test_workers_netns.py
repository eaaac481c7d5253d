"""Edge workers across a real network (SPEC §17): each worker process in a network namespace of
its own, reaching a NATS server bound to the root side of its veth link — never loopback.

The skills prove where they ran (the addresses of the namespace they see); pulling a host's
cable mid-call (its side of the link set down) shows the heartbeat TTL at work across a network
that silently drops packets, where no connection is refused or reset. Skipped without
``ip netns``, except in CI as root (:mod:`tests.support.netns`)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.fleet.wire import decode
from tests.support import netns
from tests.support.fleet import TTL, Spy, host_skill
from tests.support.netns import NetnsFleet, ip, ip_binary, network, reap_stale, require_netns
from tests.support.processes import alive, read_pid
from tests.support.server import Server, running_app
from tests.support.unprivileged import run_unprivileged
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
    host_skill(skills, "where_am_i", f'printf \'{{"addrs": %s}}\' "$({ip_binary()} -j -4 addr)"')
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
    came_from = {c.get("name"): c["ip"] for c in netns_fleet.nats.connections() if c.get("name")}
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
        done = manager.final(execution, timeout=TTL + 15)
        assert time.monotonic() - cut < TTL + 5  # the TTL, plus a loaded machine's lag
        assert done["status"] == "interrupted", done
        assert "went offline" in done["error"]["message"]
        only_alpha = {"alpha": False, "beta": True}  # beta's link is its own
        wait_for(lambda: hosts_online(manager) == only_alpha, "alpha offline, beta online")
        # Nothing reset the connection: alpha notices the silence by its pings, and stops the
        # call the manager recorded interrupted itself, still cut off.
        alpha.wait_line("cut off from the bus longer than the TTL; stopped", timeout=TTL * 3 + 15)
        child = read_pid(work / "pid")
        assert child is not None
        wait_for(lambda: not alive(child), "alpha to stop the call itself")

        link.mend()
        (work / "go").touch()  # for the second call below

        def late_outcome() -> str | None:
            for data, headers in list(spy.messages):
                mine = headers.get("Nats-Msg-Id", "").startswith(execution + ":")
                for message in decode(data) if mine else []:
                    if message.type == "outcome":
                        return str(message.data["status"])
            return None

        late = wait_for(late_outcome, "alpha's late outcome on the bus", 20)
        assert late != "succeeded", late  # it was stopped, and says so late
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


# ---- the network itself --------------------------------------------------------------------


def namespaces() -> set[str]:
    return {line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()}


def links() -> set[str]:
    return {link["ifname"] for link in json.loads(ip("-j", "link", "show"))}


def test_the_network_is_deleted_when_the_block_ends_after_a_failure_too() -> None:
    require_netns()
    with pytest.raises(RuntimeError, match="a test failed"), network(2) as net:
        made = {ns.name for ns in net.namespaces}
        pairs = {ns.outside for ns in net.namespaces}
        assert made <= namespaces() and pairs <= links()
        raise RuntimeError("a test failed")
    assert not made & namespaces()
    assert not pairs & links()


def test_what_a_dead_run_left_behind_is_reaped_and_a_live_runs_namespaces_are_kept() -> None:
    require_netns()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a run that died: its pid is free
    tag = secrets.token_hex(3)
    dead, live = f"ongrid-{gone.pid}-{tag}-0", f"ongrid-{os.getpid()}-{tag}-1"
    try:
        for name in (dead, live):
            ip("netns", "add", name)
        ip("link", "add", f"og{tag}0o", "type", "veth", "peer", "name", f"og{tag}0i", "netns", dead)
        reap_stale(older_than=3600)
        assert {dead, live} <= namespaces()  # too young to tell from a pid reused
        reap_stale(older_than=0)
        assert dead not in namespaces() and f"og{tag}0o" not in links()
        assert live in namespaces()
    finally:
        for name in (dead, live):
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", name)


def test_without_ip_netns_these_tests_skip_saying_why_but_fail_in_ci_as_root(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(netns, "ip_binary", lambda: "/usr/sbin/ip")  # even where there is none
    as_nobody = run_unprivileged(netns.unavailable.__wrapped__)
    assert as_nobody is not None and "CAP_NET_ADMIN" in as_nobody
    monkeypatch.setattr(netns, "ip_binary", lambda: None)
    assert netns.unavailable.__wrapped__() == "no `ip` command (install iproute2)"
    monkeypatch.setattr(netns, "unavailable", lambda: as_nobody)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"network namespaces unavailable: .*CAP_NET"):
        require_netns()
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(pytest.skip.Exception):
        require_netns()  # CI, but not root: CI's own machines run as root
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(pytest.fail.Exception, match=r"required in CI .*CAP_NET_ADMIN"):
        require_netns()
