"""A local run leaves a trace: mutating and dangerous runs of `ongrid-skills run` in the audit
chain of the data dir, beside a running server too; none where there is no store (and stderr
says so); safe runs and refused ones are not recorded."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.governance.principal import local_user
from tests.support.cli import cli_env, run_cli
from tests.support.processes import CLI
from tests.support.server import start_serve, stop
from tests.support.skills import write_skill

SLOW = "#!/bin/sh\ncat >/dev/null\necho waiting >&2\nexec sleep 30\n"


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    write_skill(root, "fix", **{"class": "mutating"})
    write_skill(root, "wipe", **{"class": "dangerous"})
    write_skill(root, "look")
    write_skill(root, "broken", "#!/bin/sh\ncat >/dev/null\nexit 5\n", **{"class": "mutating"})
    write_skill(root, "slow", SLOW, **{"class": "mutating"})
    return root


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir with a store (and one token.created entry)."""
    path = tmp_path / "data"
    made = run_cli(
        "token", "create", "--init", "--role", "admin", "--name", "a", ONGRID_DATA_DIR=str(path)
    )
    assert made.returncode == 0, made.stderr
    return path


def run(skills: Path, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", *args, ONGRID_SKILLS_EXTERNAL_DIRS=str(skills), ONGRID_DATA_DIR=str(data))


def entries(data: Path) -> list[dict[str, Any]]:
    """The audit chain, oldest first."""
    done = run_cli("audit", "list", "--json", "--limit", "10000", ONGRID_DATA_DIR=str(data))
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed[::-1]


def intact(data: Path) -> bool:
    done = run_cli("audit", "verify", ONGRID_DATA_DIR=str(data))
    return done.returncode == 0 and done.stderr.endswith(" entries, intact\n")


def test_a_mutating_run_is_recorded_before_it_starts_and_when_it_ends(
    skills: Path, data: Path
) -> None:
    args = {"path": "/var/tmp", "dry_run": False}
    done = run(skills, data, "fix", json.dumps(args), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    execution = json.loads(done.stdout)
    started, finished = entries(data)[1:]
    assert started["action"] == "local_run.started"
    assert started["actor"] == finished["actor"] == f"cli:{local_user()}"
    assert started["subject"] == finished["subject"] == "fix"
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data_started = started["data"]
    assert data_started["args_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert "/var/tmp" not in json.dumps(started)  # a digest, not the args
    assert data_started["class"] == "mutating"
    assert data_started["via"] == "cli --yes"
    assert len(data_started["definition_hash"]) == 64
    assert data_started["persona"] is None
    assert isinstance(data_started["pid"], int) and data_started["host"]
    assert finished["action"] == "local_run.finished"
    assert finished["data"] | {"duration_ms": None} == {
        "skill": "fix",
        "status": "succeeded",
        "exit_code": 0,
        "error": None,
        "duration_ms": None,
        "execution_id": execution["id"],
        "started_seq": started["seq"],
    }
    assert intact(data)


def test_a_failed_run_and_a_dangerous_break_glass_are_recorded_with_how(
    skills: Path, data: Path
) -> None:
    failed = run(skills, data, "broken", "--yes")
    assert failed.returncode == 1
    dangerous = run(skills, data, "wipe", "--yes", "--i-know-it-is-dangerous")
    assert dangerous.returncode == 0, dangerous.stderr
    recorded = entries(data)[1:]
    assert [(e["action"], e["subject"]) for e in recorded] == [
        ("local_run.started", "broken"),
        ("local_run.finished", "broken"),
        ("local_run.started", "wipe"),
        ("local_run.finished", "wipe"),
    ]
    assert recorded[1]["data"]["status"] == "failed"
    assert recorded[1]["data"]["exit_code"] == 5
    assert recorded[2]["data"]["via"] == "cli --yes --i-know-it-is-dangerous"
    assert recorded[2]["data"]["class"] == "dangerous"


def test_safe_runs_and_refused_runs_are_not_recorded(skills: Path, data: Path) -> None:
    assert run(skills, data, "look").returncode == 0
    assert run(skills, data, "fix").returncode == 3  # no --yes: nothing ran
    assert run(skills, data, "wipe", "--yes").returncode == 3
    assert [e["action"] for e in entries(data)] == ["token.created"]


def test_without_a_store_the_run_goes_on_and_says_nothing_was_recorded(
    skills: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = run_cli("run", "fix", "--yes", "-q", cwd=work, ONGRID_SKILLS_EXTERNAL_DIRS=str(skills))
    assert done.returncode == 0
    assert done.stdout == '{"ok": true}\n'
    assert done.stderr == (
        f"ongrid-skills: this run of fix is not recorded: no store in {work / '.ongrid'} "
        "(the default data dir: ./.ongrid under the current directory); set --data-dir or "
        "ONGRID_DATA_DIR to the server's data dir to keep a trace of local runs\n"
    )
    assert list(work.iterdir()) == []
    safe = run_cli("run", "look", cwd=work, ONGRID_SKILLS_EXTERNAL_DIRS=str(skills))
    assert "not recorded" not in safe.stderr


def test_an_interrupted_run_is_recorded_as_interrupted(skills: Path, data: Path) -> None:
    proc = subprocess.Popen(
        [CLI, "run", "slow", "--yes"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(ONGRID_SKILLS_EXTERNAL_DIRS=str(skills), ONGRID_DATA_DIR=str(data)),
    )
    assert proc.stderr is not None
    seen = [proc.stderr.readline() for _ in range(2)]
    assert seen[1] == "waiting\n", seen  # the summary line, then the skill's first line
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode != 0
    started, finished = entries(data)[1:]
    assert started["action"] == "local_run.started"
    assert finished["data"]["status"] == "interrupted"
    assert finished["data"]["started_seq"] == started["seq"]
    assert intact(data)


def test_local_runs_beside_a_running_server_keep_one_linear_intact_chain(
    skills: Path, tmp_path: Path
) -> None:
    """Two kinds of writers in several processes append to one chain at once."""
    data = tmp_path / "served"
    server = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)}, startup_lines=2)
    token = (data / "first-admin-token").read_text().strip()
    env = cli_env(ONGRID_SKILLS_EXTERNAL_DIRS=str(skills), ONGRID_DATA_DIR=str(data))

    def over_rest(_: int) -> list[int]:
        """Execute over REST until every local run has ended (so the writers overlap)."""
        statuses: list[int] = []
        while len(statuses) < 2 or any(proc.poll() is None for proc in locals_):
            answer = httpx.post(
                f"{server.url}/v1/skills/fix/execute",
                json={"args": {}, "confirm": True},
                headers={"Authorization": f"Bearer {token}"},
                timeout=60,
            )
            statuses.append(answer.status_code)
        return statuses

    locals_: list[subprocess.Popen[bytes]] = []
    try:
        locals_ += [
            subprocess.Popen([CLI, "-q", "run", "fix", "--yes"], env=env, stdout=subprocess.PIPE)
            for _ in range(4)
        ]
        with ThreadPoolExecutor(4) as pool:
            statuses = [status for batch in pool.map(over_rest, range(4)) for status in batch]
        codes = [proc.wait(timeout=60) for proc in locals_]
        for proc in locals_:
            assert proc.stdout is not None
            proc.stdout.close()
        assert set(statuses) == {200}
        assert codes == [0] * 4
        remote = httpx.get(
            f"{server.url}/v1/audit/verify",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        ).json()
        assert remote["ok"] is True, remote
    finally:
        stop(server)
    chain = entries(data)
    assert [e["seq"] for e in chain] == list(range(1, len(chain) + 1))
    actions = [e["action"] for e in chain]
    assert actions.count("local_run.started") == actions.count("local_run.finished") == 4
    served = len(statuses)
    assert actions.count("execution.started") == actions.count("execution.finished") == served
    assert intact(data)
