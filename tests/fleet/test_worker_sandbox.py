"""Sandbox profiles on edge workers (SPEC §17, §20): the worker's kernel confines the calls it
runs, and the manager shows the profile the host announced (its signed inventory covers it).
A real NATS server, a real worker process, the manager's app on a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from ongrid_skills.execution.landlock import abi
from tests.support.fleet import Fleet, host_skill
from tests.support.server import running_app
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(abi() < 4, reason="needs Landlock ABI 4 (files and TCP)")


def test_a_worker_enforces_the_sandbox_profile_of_the_calls_it_runs(
    fleet: Fleet, skills_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "marker"
    body = f"if echo x > {marker} 2>/dev/null; then echo '\"wrote\"'; else echo '\"denied\"'; fi"
    declared = {"profile": "strict", "read": [], "write": [], "network": False}
    host_skill(tmp_path / "worker-skills", "touch_outside", body, sandbox=declared)
    with running_app(fleet.manager_settings(skills_root)) as manager:
        fleet.worker("alpha", tmp_path / "worker-skills")

        def shown() -> object:
            found = manager.call("GET", "/v1/skills/touch_outside", "vera")
            return found.json().get("sandbox") if found.status_code == 200 else None

        assert wait_for(shown, "touch_outside to be offered with its sandbox") == declared
        response = manager.call(
            "POST", "/v1/skills/touch_outside/execute", "olga", json={"args": {"host": "alpha"}}
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"] == "denied"
    assert not marker.exists()
