"""The bus cannot change what a skill is (issue 27, item 1): a party that may write the hosts
bucket announces a host of its own listing a real host's dangerous skill as ``safe`` (same name,
same definition hash), and tampers with the real host's own entry. Black box: a real ``serve``, a
real NATS server, a real worker holding the dangerous skill; the forger is a NATS client writing
the bucket. A viewer never runs the skill, and the forged entries show as unverified."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.fleet.inventory import hosted, record_of, skills_digest
from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.fleet import TTL, Fleet, Forger, host_skill, read_entry
from tests.support.server import ServeProcess, running_app, start_serve, stop
from tests.support.skills import load
from tests.support.waiting import wait_for

SKILL = "wipe_disk"


@pytest.fixture
def ran(tmp_path: Path) -> Path:
    return tmp_path / "ran.log"


@pytest.fixture
def skills(tmp_path: Path, ran: Path) -> Path:
    root = tmp_path / "worker-skills"
    host_skill(root, SKILL, f'echo "ran $ARGS" >> {ran}\necho "{{}}"', **{"class": "dangerous"})
    return root


@pytest.fixture
def forger(fleet: Fleet) -> Iterator[Forger]:
    forging = Forger(fleet.nats.url, fleet.prefix)
    try:
        yield forging
    finally:
        forging.close()


@dataclass
class Manager:
    """A real ``serve`` of the fleet, seen by a viewer."""

    served: ServeProcess
    token: str

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.request(method, self.served.url + path, headers=headers, timeout=10, **kw)

    def host(self, host: str) -> dict[str, Any] | None:
        items = self.request("GET", "/v1/hosts").json()["items"]
        return next((h for h in items if h["host"] == host), None)

    def offered_on(self, host: str) -> dict[str, Any] | None:
        response = self.request("GET", f"/v1/skills/{SKILL}")
        if response.status_code != 200:
            return None
        skill: dict[str, Any] = response.json()
        return skill if host in skill["schema"]["properties"]["host"]["enum"] else None

    def run_as_viewer(self, host: str) -> httpx.Response:
        return self.request("POST", f"/v1/skills/{SKILL}/execute", json={"args": {"host": host}})


@contextmanager
def serving(fleet: Fleet, tmp_path: Path) -> Iterator[Manager]:
    data = Path(fleet.settings.data_dir)
    store = open_store(str(data))
    token, _ = store.tokens.create("viewer", Role.VIEWER)
    store.close()
    (tmp_path / "manager-skills").mkdir()
    served = start_serve(data, fleet.manager_env(tmp_path / "manager-skills"))
    try:
        yield Manager(served, token)
    finally:
        stop(served)


def as_safe(skills: Path, host: str) -> bytes:
    """An entry for ``host`` listing the worker's skills exactly as it would, but ``safe``."""
    registry, _ = load(external=[skills])
    records = [{**record_of(s), "class": "safe"} for s in hosted(registry.skills.values())]
    now = time.time()
    body = {
        "host": host, "instance": "forged", "pid": 1, "version": "0.1.0", "labels": {},
        "ttl": float(TTL), "started_at": now, "heartbeat_at": now, "running": 0,
        "skills_digest": skills_digest(records), "skills": records,
    }  # fmt: skip
    return json.dumps(body).encode()


def test_a_forged_host_listing_a_dangerous_skill_as_safe_never_lets_a_viewer_run_it(
    fleet: Fleet, tmp_path: Path, skills: Path, ran: Path, forger: Forger
) -> None:
    # The forged host is in the bucket before the real one announces the skill, and sorts first.
    forger.write("aaa-forged", as_safe(skills, "aaa-forged"))
    with serving(fleet, tmp_path) as manager:
        wait_for(lambda: manager.host("aaa-forged"), "the forged host to be listed")
        fleet.worker("alpha", skills)
        skill = wait_for(lambda: manager.offered_on("alpha"), "the skill to be offered on alpha")

        response = manager.run_as_viewer("alpha")
        assert response.status_code == 403, response.text
        assert skill["class"] == "dangerous"
        assert skill["schema"]["properties"]["host"]["enum"] == ["alpha"]
        forged = manager.host("aaa-forged")
        assert forged is not None and forged["verified"] is False
        assert "unsigned" in forged["unverified"] and forged["skills"] == {}
        alpha = manager.host("alpha")
        assert alpha is not None and alpha["verified"] is True and alpha["unverified"] is None
        metrics = manager.request("GET", "/metrics").text
        assert 'host="alpha"' in metrics and "aaa-forged" not in metrics  # no series of its own
    assert not ran.exists()


def test_a_tampered_entry_under_the_real_hosts_key_is_unverified_and_never_runs(
    fleet: Fleet, tmp_path: Path, skills: Path, ran: Path, forger: Forger
) -> None:
    with serving(fleet, tmp_path) as manager:
        fleet.worker("alpha", skills)
        wait_for(lambda: manager.offered_on("alpha"), "the skill to be offered on alpha")
        genuine = json.loads(read_entry(fleet.nats.url, fleet.prefix, "alpha"))
        inventory = genuine["inventory"].replace('"class":"dangerous"', '"class":"safe"')
        assert inventory != genuine["inventory"]
        forger.write("alpha", json.dumps({**genuine, "inventory": inventory}).encode())

        def unverified() -> dict[str, Any] | None:
            found = manager.host("alpha")
            return found if found is not None and found["verified"] is False else None

        seen = wait_for(unverified, "alpha to be shown unverified")
        assert "signature" in seen["unverified"]
        # Whichever entry the manager read last (the forged one, or the worker's next heartbeat),
        # the viewer never runs the skill.
        for _ in range(10):
            response = manager.run_as_viewer("alpha")
            assert response.status_code in (403, 404), response.text
        forger.close()  # the worker's next heartbeat puts its own entry back
        wait_for(lambda: not unverified(), "alpha to be verified again", timeout=3 * TTL)
        assert manager.run_as_viewer("alpha").status_code == 403
    assert not ran.exists()


def test_without_worker_keys_a_manager_offers_no_host_skill_and_says_why_at_start(
    fleet: Fleet, skills: Path, skills_root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fleet.worker("alpha", skills)
    caplog.set_level(logging.WARNING, logger="ongrid_skills")
    with running_app(fleet.manager_settings(skills_root, fleet_worker_keys=None)) as manager:

        def listed() -> dict[str, Any] | None:
            items = manager.call("GET", "/v1/hosts", "vera").json()["items"]
            return next((h for h in items if h["host"] == "alpha"), None)

        alpha = wait_for(listed, "alpha to be listed")
        assert alpha["verified"] is False and alpha["online"] is False
        reason = "no worker key is trusted: ONGRID_FLEET_WORKER_KEYS is not set"
        assert alpha["unverified"] == reason
        assert manager.call("GET", f"/v1/skills/{SKILL}", "vera").status_code == 404
    assert "ONGRID_FLEET_WORKER_KEYS is not set: no worker is trusted" in caplog.text
