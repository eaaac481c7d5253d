"""The NATS permissions docs/fleet.md ships (issue 27, item 1): a real ``nats-server`` started
with the configuration written there (read from the page), a manager and a worker each with its
own user. The fleet works; the worker's user cannot write another host's inventory, publish a
call, or read another party's replies. And a party connecting with no authentication at all
says so at start."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import pytest

from ongrid_skills.fleet.bus import Names
from tests.support.fleet import Fleet, WorkerProcess, fleet_on, host_skill
from tests.support.nats import NatsServer, running_nats
from tests.support.server import Server, running_app
from tests.support.waiting import until, wait_for

DOC = Path(__file__).resolve().parents[2] / "docs" / "fleet.md"
MARK = (
    "<!-- the NATS configuration: tests/fleet/test_nats_permissions.py starts a server with it -->"
)
NO_AUTH = "with no authentication"
PREFIX = "ongrid"  # the page's


def documented_config() -> str:
    text = DOC.read_text()
    assert MARK in text, "docs/fleet.md lost its NATS configuration"
    block = re.search(r"```[a-z]*\n(.*?)```", text[text.index(MARK) :], re.DOTALL)
    assert block is not None
    return block.group(1)


def user_url(server: NatsServer, user: str) -> str:
    password = re.search(rf'user: {re.escape(user)}, password: "([^"]+)"', documented_config())
    assert password is not None, f"no user {user} in the documented configuration"
    return f"nats://{user}:{password.group(1)}@{server.host}:{server.port}"


@pytest.fixture
def server() -> Iterator[NatsServer]:
    # The address and the store are the test's own (given on the command line): the rest is
    # the page's, word for word.
    config = re.sub(r"^(listen|jetstream)\b.*$", "", documented_config(), flags=re.MULTILINE)
    with running_nats(config) as started:
        yield started


@pytest.fixture
def fleet(tmp_path: Path, server: NatsServer) -> Iterator[Fleet]:
    with fleet_on(tmp_path, server, PREFIX) as group:
        yield group


def test_the_documented_configuration_is_not_an_open_server(server: NatsServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=10) as conn:
        reader = conn.makefile("rb")
        info = json.loads(reader.readline().removeprefix(b"INFO "))
        assert info["auth_required"] is True
        conn.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        assert reader.readline().startswith(b"-ERR 'Authorization Violation'")


def test_the_documented_consumer_names_are_those_of_their_hosts() -> None:
    config = documented_config()
    for host in ("web-1", "web-2"):
        consumer = Names(PREFIX).worker_consumer(host)
        assert f'"$KV.ongrid-hosts.{host}"' in config
        assert f"$JS.API.CONSUMER.MSG.NEXT.ongrid-calls.{consumer}" in config
        assert f'"{Names(PREFIX).worker_inbox(host)}.>"' in config


def test_with_the_documented_users_the_fleet_works_and_a_worker_can_touch_only_its_own(
    fleet: Fleet, server: NatsServer, tmp_path: Path, skills_root: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", "echo '{\"here\": true}'")
    caplog.set_level(logging.WARNING, logger="ongrid_skills")
    settings = fleet.manager_settings(skills_root, nats_url=user_url(server, "manager"))
    with running_app(settings) as manager:  # first: it creates the streams and the bucket
        worker = fleet.worker("web-1", skills, ONGRID_NATS_URL=user_url(server, "web-1"))
        wait_for(lambda: hosts(manager) == ["web-1"], "web-1 to be online and verified")
        done = manager.call(
            "POST", "/v1/skills/where_am_i/execute", "olga", json={"args": {"host": "web-1"}}
        ).json()
        assert done["status"] == "succeeded", done
        assert done["result"] == {"here": True}
        refused = asyncio.run(as_worker(user_url(server, "web-1"), server))
        assert refused == {
            "another host's entry": True,
            "a call": True,
            "an event": False,
            "another party's replies": True,
        }
        assert hosts(manager) == ["web-1"]  # no web-2 appeared
    assert NO_AUTH not in worker.text()
    assert NO_AUTH not in caplog.text
    # The server says why it refused each (and refused nothing the fleet needed).
    violations = [line for line in server.log.read_text().splitlines() if "Violation" in line]
    assert len(violations) == 3, "\n".join(violations)
    for kind, subject in (
        ("Publish", "$KV.ongrid-hosts.web-2"),
        ("Publish", "ongrid.call.web-1"),
        ("Subscription", "_INBOX.ongrid.managers.>"),
    ):
        wanted = f'{kind} Violation - User "web-1", Subject "{subject}"'
        assert any(wanted in line for line in violations), (wanted, violations)


def hosts(manager: Server) -> list[str]:
    items = manager.call("GET", "/v1/hosts", "vera").json()["items"]
    return [h["host"] for h in items if h["online"] and h["verified"]]


async def as_worker(url: str, server: NatsServer) -> dict[str, bool]:
    """What the web-1 user tries beyond its rights: True for each attempt refused."""
    errors: list[Exception] = []

    async def heard(exc: Exception) -> None:
        errors.append(exc)

    names = Names(PREFIX)
    nc = await nats.connect(  # its replies where the worker's come: only the publish is refused
        url, error_cb=heard, max_reconnect_attempts=0, inbox_prefix=names.worker_inbox("web-1")
    )
    js = nc.jetstream()
    out: dict[str, bool] = {}
    try:
        for what, subject in (
            ("another host's entry", f"$KV.{names.hosts_bucket}.web-2"),
            ("a call", names.call_subject("web-1")),
            ("an event", f"{names.reply_prefix('nobody')}.some-call"),  # allowed: the control
        ):
            try:
                await js.publish(subject, b"{}", timeout=2)
                out[what] = False
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                out[what] = True
        await nc.subscribe(f"{names.manager_inbox}.>")  # the server refuses it asynchronously

        def refused_subscription() -> bool:
            return any("subscription" in str(e).lower() for e in errors)

        out["another party's replies"] = await until(refused_subscription, "the refusal", 10)
    finally:
        await nc.close()
    return out


def test_a_worker_or_manager_connecting_with_no_authentication_warns_at_start(
    tmp_path: Path, nats_server: NatsServer, fleet_prefix: str, skills_root: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", "echo '{}'")
    caplog.set_level(logging.WARNING, logger="ongrid_skills")
    with fleet_on(tmp_path, nats_server, fleet_prefix) as open_fleet:  # the suite's open server
        worker: WorkerProcess = open_fleet.worker("alpha", skills)
        assert f"worker alpha connects to {nats_server.url} {NO_AUTH}" in worker.text()
        with running_app(open_fleet.manager_settings(skills_root)):
            pass
    warned = [r.getMessage() for r in caplog.records if NO_AUTH in r.getMessage()]
    assert len(warned) == 1 and "ongrid-skills manager" in warned[0], warned
    assert "docs/fleet.md, NATS permissions" in warned[0]
