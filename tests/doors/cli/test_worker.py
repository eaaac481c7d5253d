"""``ongrid-skills worker`` and ``ongrid-skills hosts``, driven as an operator would: real
processes, a real NATS server, a real ``serve``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.fleet import Fleet, host_skill
from tests.support.processes import CLI
from tests.support.server import start_serve, stop
from tests.support.waiting import wait_for


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": os.environ["PATH"], "ONGRID_BUNDLED_SKILLS": "0", **env}
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=environ, timeout=60)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    done = cli("hosts", "key", env={"ONGRID_DATA_DIR": str(tmp_path / "manager")})
    assert done.returncode == 0, done.stderr
    path = tmp_path / "managers.pub"
    path.write_text(done.stdout)
    path.chmod(0o600)
    return path


def test_hosts_key_prints_the_same_public_key_each_time_from_a_private_key_file(
    tmp_path: Path,
) -> None:
    env = {"ONGRID_DATA_DIR": str(tmp_path / "data")}
    first, second = cli("hosts", "key", env=env), cli("hosts", "key", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("ssh-ed25519 AAAA") and first.stdout == second.stdout
    key = tmp_path / "data" / "fleet.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {}, "set ONGRID_NATS_URL"),
        ((), {"ONGRID_NATS_URL": "nats://127.0.0.1:1"}, "set ONGRID_FLEET_MANAGER_KEYS"),
        (("--host-id", "a b"), {"ONGRID_NATS_URL": "nats://x"}, "host id 'a b' must be"),
        (("--label", "nokey"), {"ONGRID_NATS_URL": "nats://x"}, "expected KEY=VALUE"),
    ],
)
def test_the_worker_refuses_to_start_without_what_it_needs(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    done = cli("worker", *args, env={"ONGRID_DATA_DIR": str(tmp_path), **env})
    assert done.returncode == 2, done
    assert message in done.stderr


@pytest.mark.parametrize(
    ("text", "message"), [("", "holds no key"), ("ssh-rsa AAAAB3 x\n", "ssh-rsa key")]
)
def test_the_worker_refuses_a_keys_file_it_cannot_use(
    tmp_path: Path, text: str, message: str
) -> None:
    keys = tmp_path / "keys.pub"
    keys.write_text(text)
    keys.chmod(0o600)
    env = {"ONGRID_NATS_URL": "nats://127.0.0.1:1", "ONGRID_FLEET_MANAGER_KEYS": str(keys)}
    done = cli("worker", env={"ONGRID_DATA_DIR": str(tmp_path), **env})
    assert done.returncode == 2, done
    assert message in done.stderr


def test_worker_print_key_prints_the_line_a_manager_trusts_from_a_private_key_file(
    tmp_path: Path,
) -> None:
    env = {"ONGRID_DATA_DIR": str(tmp_path / "data")}  # no NATS, no manager keys: not needed
    first = cli("worker", "--host-id", "web-1", "--print-key", env=env)
    second = cli("worker", "--host-id", "web-1", "--print-key", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("web-1 ssh-ed25519 AAAA") and first.stdout == second.stdout
    assert " ongrid-worker@" in first.stdout
    key = tmp_path / "data" / "worker.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    key.chmod(0o640)
    refused = cli("worker", "--host-id", "web-1", "--print-key", env=env)
    assert refused.returncode == 1
    assert f"worker key file {key} may be read by group or others (mode 0640)" in refused.stderr


def test_the_worker_refuses_a_manager_keys_file_others_may_read_as_the_audit_key_is(
    tmp_path: Path, keys: Path
) -> None:
    keys.chmod(0o644)
    env = {"ONGRID_NATS_URL": "nats://127.0.0.1:1", "ONGRID_FLEET_MANAGER_KEYS": str(keys)}
    done = cli("worker", env={"ONGRID_DATA_DIR": str(tmp_path / "w"), **env})
    assert done.returncode == 2, done
    assert (
        f"manager keys file {keys} may be read by group or others (mode 0644); "
        f"refusing to use it: chmod 600 {keys}"
    ) in done.stderr


def test_hosts_lists_the_workers_a_server_sees(fleet: Fleet, tmp_path: Path) -> None:
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", "echo '{}'")
    fleet.worker("web-1", skills, "env=prod")
    data = Path(fleet.settings.data_dir)
    store = open_store(str(data))
    token, _ = store.tokens.create("viewer", Role.VIEWER)
    store.close()
    env = fleet.manager_env(tmp_path / "manager-skills")
    (tmp_path / "manager-skills").mkdir()
    served = start_serve(data, env)
    try:
        auth = {"ONGRID_URL": served.url, "ONGRID_TOKEN": token}

        def listed() -> str:
            done = cli("hosts", env=auth)
            assert done.returncode == 0, done.stderr
            return done.stdout if "web-1" in done.stdout else ""

        line = wait_for(listed, "the worker in `hosts`")
        assert "online" in line and "skills=1" in line and "env=prod" in line
        body = json.loads(cli("hosts", "--json", env=auth).stdout)
        assert [h["host"] for h in body["items"]] == ["web-1"]
        assert body["fleet"]["prefix"] == fleet.prefix
    finally:
        stop(served)


def test_hosts_shows_a_worker_whose_key_is_not_trusted_as_unverified_with_the_reason(
    fleet: Fleet, tmp_path: Path
) -> None:
    skills = tmp_path / "worker-skills"
    host_skill(skills, "where_am_i", "echo '{}'")
    fleet.worker("stranger", skills, trusted=False)
    data = Path(fleet.settings.data_dir)
    store = open_store(str(data))
    token, _ = store.tokens.create("viewer", Role.VIEWER)
    store.close()
    (tmp_path / "manager-skills").mkdir()
    served = start_serve(data, fleet.manager_env(tmp_path / "manager-skills"))
    try:
        auth = {"ONGRID_URL": served.url, "ONGRID_TOKEN": token}

        def listed() -> str:
            done = cli("hosts", env=auth)
            assert done.returncode == 0, done.stderr
            return done.stdout if "stranger" in done.stdout else ""

        line = wait_for(listed, "the worker in `hosts`")
        assert "UNVERIFIED" in line and "skills=0" in line
        assert "(no key is trusted for host stranger in ONGRID_FLEET_WORKER_KEYS)" in line
    finally:
        stop(served)


def test_hosts_says_when_a_server_has_no_fleet(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = open_store(str(data))
    token, _ = store.tokens.create("viewer", Role.VIEWER)
    store.close()
    served = start_serve(data, {})
    try:
        done = cli("hosts", env={"ONGRID_URL": served.url, "ONGRID_TOKEN": token})
    finally:
        stop(served)
    assert done.returncode == 0 and done.stdout == ""
    assert "no fleet" in done.stderr
