"""``ongrid-skills pack install|list|show|remove|rollback|upgrade|search|outdated|index build``
as the console script, on a data dir, with and without a running server; and kill -9 of an
install at each step, which leaves the previous state loaded and the record consistent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.governance.principal import local_user
from ongrid_skills.packs.build import build_archive
from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.packs import KeyPair, make_key, write_pack
from tests.support.processes import CLI
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import EXAMPLE_SKILLS, write_skill
from tests.support.waiting import wait_for

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
VERSION_SCRIPT = '#!/bin/sh\ncat >/dev/null\necho \'{{"version": "{version}"}}\'\n'


@dataclass
class Data:
    base: Path
    env: dict[str, str]
    key: KeyPair
    archives: dict[str, Path] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return Path(self.env["ONGRID_DATA_DIR"])

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, "-q", *args],
            capture_output=True,
            text=True,
            env={**self.env, **env},
            timeout=120,
            check=False,
        )

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def audit(self, action: str) -> list[dict[str, Any]]:
        store = open_store(str(self.data_dir))
        try:
            return store.audit.entries(action=action, limit=1000)
        finally:
            store.close()


def versioned(base: Path, version: str, *, skills: tuple[str, ...] = ("which",)) -> Path:
    """A pack ``ops`` whose skill ``which`` answers its version."""
    folder = write_pack(base / f"src-{version}", "ops", version, skills=())
    for name in skills:
        write_skill(folder / "skills", name, VERSION_SCRIPT.format(version=version))
    out = base / f"out-{version}"
    out.mkdir()
    return build_archive(folder, out).path


@pytest.fixture
def data(tmp_path: Path) -> Data:
    key = make_key(tmp_path / "keys", "author")
    skills = tmp_path / "skills"
    write_skill(skills, "configured")
    trusted = tmp_path / "trusted.keys"
    trusted.write_text(key.public.read_text() + (EXAMPLES / "TEST-KEY-DO-NOT-USE.pub").read_text())
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_TRUSTED_PACK_KEYS": str(trusted),
        "ONGRID_PACK_INDEXES": str(EXAMPLES / "index.json"),
        "ONGRID_PACK_KEEP_SECONDS": "0",
    }
    found = Data(tmp_path, env, key)
    found.archives = {v: versioned(tmp_path, v) for v in ("1.0.0", "2.0.0")}
    return found


def test_install_list_show_rollback_remove_from_the_command_line(data: Data) -> None:
    first = data.run("pack", "install", str(data.archives["1.0.0"]))
    assert first.returncode == 0, first.stderr
    assert "installed ops@1.0.0" in first.stdout
    assert "not signed: installed on your word" in first.stderr
    upgraded = data.json("pack", "install", str(data.archives["2.0.0"]))
    assert (upgraded["action"], upgraded["from_version"]) == ("upgrade", "1.0.0")
    listed = data.json("pack", "list")
    assert [(p["id"], p["version"], p["previous_version"]) for p in listed] == [
        ("ops", "2.0.0", "1.0.0")
    ]
    assert data.json("run", "which", "{}")["result"] == {"version": "2.0.0"}
    shown = data.run("pack", "show", "ops")
    assert "2.0.0" in shown.stdout and "previous" in shown.stdout
    back = data.run("pack", "rollback", "ops")
    assert "rolled back ops 2.0.0 → 1.0.0" in back.stdout, back.stderr
    assert data.json("run", "which", "{}")["result"] == {"version": "1.0.0"}
    removed = data.run("pack", "remove", "ops")
    assert "removed ops (was 1.0.0)" in removed.stdout
    assert data.run("run", "which", "{}").returncode == 2  # unknown skill
    again = data.run("pack", "remove", "ops")  # idempotent: a retried removal is safe
    assert (again.returncode, again.stdout) == (0, "ops: nothing to remove\n")
    assert again.stderr == "pack ops is not installed (removed already?): nothing changed\n"
    actors = {e["actor"] for e in data.audit("pack.install") + data.audit("pack.remove")}
    assert actors == {f"cli:{local_user()}"}


def test_exit_codes_say_why_an_install_was_refused(data: Data, tmp_path: Path) -> None:
    bad = write_pack(tmp_path / "bad", "bad", skills=("ok",))
    (bad / "skills" / "broken").mkdir()
    (bad / "skills" / "broken" / "skill.json").write_text("{")
    invalid = data.run("pack", "install", str(bad))
    assert invalid.returncode == 2
    assert "skills/broken/skill.json:1:" in invalid.stderr

    clash = write_pack(tmp_path / "clash", "clash", skills=("configured", "fresh"))
    collision = data.run("pack", "install", str(clash))
    assert collision.returncode == 2
    assert "skill 'configured' is taken by" in collision.stderr

    untrusted = data.run("pack", "install", f"git+{tmp_path}/nowhere.git")
    assert untrusted.returncode == 1  # nothing to clone: a fetch that failed
    assert data.run("pack", "list", "--json").stdout.strip() == "[]"


def test_search_install_by_id_and_outdated_through_the_example_index(data: Data) -> None:
    found = data.run("pack", "search", "host")
    assert found.returncode == 0 and found.stdout.startswith("ops-basics"), found.stderr
    installed = data.json("pack", "install", "ops-basics@1.1.0")
    assert installed["pack"]["trust"] == "trusted"
    assert data.json("pack", "outdated")["items"] == []
    assert data.json("pack", "upgrade", "ops-basics")["action"] == "unchanged"


def test_index_build_writes_an_index_the_indexes_setting_reads(data: Data, tmp_path: Path) -> None:
    market = tmp_path / "market"
    market.mkdir()
    for archive in data.archives.values():
        (market / archive.name).write_bytes(archive.read_bytes())
    built = data.run("pack", "index", "build", str(market))
    assert built.returncode == 0 and "(1 pack, 2 versions)" in built.stdout, built.stderr
    env = {"ONGRID_PACK_INDEXES": str(market / "index.json")}
    assert data.run("pack", "install", "ops@1.0.0", **env).returncode == 0
    outdated = data.run("pack", "outdated", **env)
    assert "ops" in outdated.stdout and "1.0.0 → 2.0.0" in outdated.stdout
    upgraded = data.run("pack", "upgrade", "ops", **env)
    assert "upgraded ops 1.0.0 → 2.0.0" in upgraded.stdout, upgraded.stderr


def test_concurrent_installs_from_two_processes_both_land(data: Data, tmp_path: Path) -> None:
    folders = [write_pack(tmp_path / f"c{n}", f"conc{n}", skills=(f"s{n}",)) for n in range(3)]
    procs = [
        subprocess.Popen(
            [CLI, "-q", "pack", "install", str(f)],
            env=data.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in folders
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert sorted(p["id"] for p in data.json("pack", "list")) == ["conc0", "conc1", "conc2"]
    assert len(data.audit("pack.install")) == 3


@pytest.fixture
def served(data: Data) -> Iterator[ServeProcess]:
    store = open_store(str(data.data_dir))
    token = store.tokens.create("admin", Role.ADMIN)[0]
    store.close()
    data.env["TEST_TOKEN"] = token
    process = start_serve(data.data_dir, {k: v for k, v in data.env.items() if k != "PATH"})
    try:
        yield process
    finally:
        stop(process)


def call(served: ServeProcess, data: Data, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {data.env['TEST_TOKEN']}"}
    return httpx.request(method, served.url + path, headers=headers, timeout=30, **kw)


def which(served: ServeProcess, data: Data) -> str | None:
    answer = call(served, data, "POST", "/v1/skills/which/execute", json={})
    if answer.status_code == 404:
        return None
    return str(answer.json()["result"]["version"])


def test_a_running_server_picks_up_what_the_command_line_installs(
    data: Data, served: ServeProcess
) -> None:
    assert which(served, data) is None
    assert data.run("pack", "install", str(data.archives["1.0.0"])).returncode == 0
    wait_for(lambda: which(served, data) == "1.0.0", "the server to load the pack")
    assert data.run("pack", "install", str(data.archives["2.0.0"])).returncode == 0
    wait_for(lambda: which(served, data) == "2.0.0", "the server to load the upgrade")
    reloads = call(served, data, "GET", "/v1/audit", params={"action": "registry.reloaded"})
    assert {e["actor"] for e in reloads.json()["items"]} == {"packs"}


def paused_install(data: Data, archive: Path, point: str) -> None:
    """Run ``pack install`` until it says it paused at ``point``, then kill -9 it."""
    proc = subprocess.Popen(
        [CLI, "-q", "pack", "install", str(archive)],
        env={**data.env, "ONGRID_TEST_PACK_PAUSE": point},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")))
    reader.daemon = True
    reader.start()
    try:
        wait_for(lambda: f"pack: paused at {point}\n" in lines, f"the install to pause at {point}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(5)
        proc.stderr.close()


@pytest.mark.parametrize("point", ["validated", "begun", "placed", "switched"])
def test_kill_9_at_any_step_leaves_a_loaded_state_and_a_record_that_agrees(
    data: Data, served: ServeProcess, point: str
) -> None:
    assert data.run("pack", "install", str(data.archives["1.0.0"])).returncode == 0
    wait_for(lambda: which(served, data) == "1.0.0", "the server to load 1.0.0")

    paused_install(data, data.archives["2.0.0"], point)

    switched = point == "switched"
    expected = "2.0.0" if switched else "1.0.0"
    wait_for(lambda: which(served, data) == expected, f"the server to hold {expected}")
    (view,) = data.json("pack", "list")
    assert view["version"] == expected  # the record says what the server runs
    assert view["pending"] == (None if point == "validated" else "upgrade")
    assert data.audit("pack.upgrade") == []
    assert which(served, data) == expected

    again = data.json("pack", "install", str(data.archives["2.0.0"]))  # recovers, then installs
    assert again["action"] == ("unchanged" if switched else "upgrade")
    (view,) = data.json("pack", "list")
    assert (view["version"], view["pending"], view["previous_version"]) == ("2.0.0", None, "1.0.0")
    (entry,) = data.audit("pack.upgrade")
    assert entry["data"].get("recovered", False) is switched
    wait_for(lambda: which(served, data) == "2.0.0", "the server to hold 2.0.0")
    staging = data.data_dir / "packs" / ".staging"
    assert list(staging.iterdir()) == []


def test_a_server_starting_after_a_kill_finishes_the_record_before_serving(data: Data) -> None:
    assert data.run("pack", "install", str(data.archives["1.0.0"])).returncode == 0
    paused_install(data, data.archives["2.0.0"], "placed")
    placed = data.data_dir / "packs" / "ops" / "2.0.0"
    assert placed.is_dir()
    store = open_store(str(data.data_dir))
    token = store.tokens.create("admin", Role.ADMIN)[0]
    store.close()
    data.env["TEST_TOKEN"] = token
    process = start_serve(data.data_dir, {k: v for k, v in data.env.items() if k != "PATH"})
    try:
        wait_for(lambda: not placed.exists(), "the aborted version's files to go")
        (view,) = data.json("pack", "list")
        assert (view["version"], view["pending"]) == ("1.0.0", None)
        assert which(process, data) == "1.0.0"
    finally:
        stop(process)
