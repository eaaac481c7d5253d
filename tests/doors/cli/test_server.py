"""The server-side CLI: `serve` start-up output, `token …` on the data dir, and `approvals …` /
`executions …` against a real `serve` (with --url/--token and with ONGRID_URL/ONGRID_TOKEN).

Most commands run in-process through click's CliRunner (the same code as the console script,
without paying the interpreter start-up each time); the console script itself runs where it
matters: `serve`, `token create`'s stdout, and `executions logs -f` streaming live.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from ongrid_skills.doors.cli.main import cli
from tests.support.processes import CLI, venv_bin
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import write_skill
from tests.support.sockets import free_port
from tests.support.waiting import wait_for

TOKEN_RE = re.compile(r"ogs_[A-Za-z0-9_-]{20,}")
TALKER = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo 'first line' >&2
while [ ! -e "$gate" ]; do sleep 0.01; done
echo 'second line' >&2
echo '{"done": true}'
"""
FINAL = {"succeeded", "failed", "rejected", "cancelled", "expired", "denied", "invalid_args"}


@dataclass
class Remote:
    base: Path
    data: Path
    env: dict[str, str]
    first_start: list[str]
    server: ServeProcess
    tokens: dict[str, str] = field(default_factory=dict)

    def cli(self, *args: str, token: str | None = None, **env: str | None) -> Result:
        """Run the CLI in-process; ``token``: pass --url/--token after the command."""
        argv = list(args)
        if token is not None:
            argv += ["--url", self.server.url, "--token", token]
        environ: dict[str, str | None] = {
            "ONGRID_DATA_DIR": str(self.data),
            "ONGRID_URL": None,
            "ONGRID_TOKEN": None,
            **env,
        }
        return CliRunner().invoke(cli, argv, env=environ, catch_exceptions=False)

    def http(self, method: str, path: str, who: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, f"{self.server.url}{path}", headers=headers, timeout=30, **kw)

    def final(self, execution_id: str) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            body: dict[str, Any] = self.http(
                "GET", f"/v1/executions/{execution_id}", "admin"
            ).json()
            return body if body["status"] in FINAL else None

        return wait_for(finished, f"execution {execution_id} to finish", timeout=20)


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    """A fresh data dir served once (prints the admin token), stopped, given more tokens with
    the CLI while stopped, then served again (prints no token) for the remote commands."""
    base = tmp_path_factory.mktemp("cli-remote")
    skills = base / "skills"
    skills.mkdir()
    write_skill(skills, "disk_clean", **{"class": "mutating"})
    write_skill(skills, "echo", "#!/bin/sh\necho 'echo says hi' >&2\nexec cat\n")
    write_skill(skills, "talker", TALKER)
    data = base / "data"
    env = {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)}
    first = start_serve(data, env, startup_lines=2)
    after_first = stop(first)
    assert "token" not in after_first
    match = TOKEN_RE.fullmatch((data / "first-admin-token").read_text().strip())
    assert match, first.lines
    remote = Remote(base, data, env, first.lines, first, {"admin": match.group(0)})
    for name, role in [("olga", "operator"), ("oscar", "operator"), ("vera", "viewer")]:
        result = remote.cli("token", "create", "--role", role, "--name", name)
        assert result.exit_code == 0, result.output
        remote.tokens[name] = result.stdout.strip()
    second = start_serve(data, env)
    remote.server = second
    try:
        yield remote
    finally:
        stop(second)


# ---- serve and tokens ---------------------------------------------------------------------------
def test_serve_on_a_fresh_data_dir_logs_only_the_id_of_its_admin_token(remote: Remote) -> None:
    """stdout is a pipe here (a log): the token goes to a 0600 file, never to the output."""
    serving, token_line = remote.first_start
    assert serving.startswith("ongrid-skills: serving on http://127.0.0.1:")
    assert f"(data in {remote.data})" in serving
    url = serving.split()[3]  # "ongrid-skills: serving on http://127.0.0.1:PORT (data in …)"
    assert serving.rstrip().endswith(f"; web console at {url}/")
    token_file = remote.data / "first-admin-token"
    assert token_line.startswith("ongrid-skills: first start, admin token ogs_")
    assert f"written to {token_file}" in token_line
    assert token_line.rstrip().endswith(f"log in at {url}/login with it")
    assert not TOKEN_RE.search(token_line)
    assert remote.tokens["admin"] not in token_line
    assert remote.tokens["admin"][:8] in token_line  # a prefix to recognise it by
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert remote.http("POST", "/v1/reload", "admin").status_code == 200  # an admin token


def test_serve_on_a_terminal_prints_the_admin_token_once(tmp_path: Path) -> None:
    """A pseudo-terminal as stdout: the one place the whole token is shown."""
    port = free_port()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [venv_bin("ongrid-skills"), "-q", "serve", "--port", str(port)],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env={
            "PATH": os.environ["PATH"],
            "ONGRID_DATA_DIR": str(tmp_path / "data"),
            "ONGRID_BUNDLED_SKILLS": "0",
        },
    )
    os.close(follower)
    try:
        seen = b""
        deadline = time.monotonic() + 30
        while seen.count(b"\n") < 2:
            assert time.monotonic() < deadline, seen
            readable, _, _ = select.select([leader], [], [], 1)
            if readable:
                seen += os.read(leader, 4096)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        os.close(leader)
    serving, token_line = seen.decode().splitlines()[:2]
    assert serving.startswith("ongrid-skills: serving on http://127.0.0.1:")
    assert token_line.startswith("ongrid-skills: first start, admin token (shown once")
    assert f"log in at http://127.0.0.1:{port}/login with it" in token_line
    assert TOKEN_RE.fullmatch(token_line.rsplit(" ", 1)[1].strip())
    assert not (tmp_path / "data" / "first-admin-token").exists()


def test_a_second_start_prints_the_url_but_no_token(remote: Remote) -> None:
    [serving] = remote.server.lines
    assert serving.startswith(f"ongrid-skills: serving on {remote.server.url} ")
    assert "token" not in serving
    assert not TOKEN_RE.search(serving)


def test_token_create_prints_only_the_token_on_stdout(remote: Remote) -> None:
    """The console script itself (on a data dir of its own: see the last test of this file)."""
    environ = {"PATH": os.environ["PATH"], "ONGRID_DATA_DIR": str(remote.base / "other-data")}
    done = subprocess.run(
        [CLI, "token", "create", "--init", "--role", "operator", "--name", "x"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert TOKEN_RE.fullmatch(done.stdout.rstrip("\n"))
    assert done.stdout.count("\n") == 1
    assert done.stdout.strip() not in done.stderr


def test_tokens_created_with_the_cli_authenticate_with_their_role(remote: Remote) -> None:
    assert remote.http("GET", "/v1/skills", "vera").status_code == 200
    assert remote.http("POST", "/v1/reload", "olga").status_code == 403
    ran = remote.http("POST", "/v1/skills/disk_clean/execute", "olga", json={"confirm": True})
    assert ran.json()["requested_by"] == "olga"


def test_token_create_refuses_a_duplicate_active_name(remote: Remote) -> None:
    result = remote.cli(
        "token",
        "create",
        "--init",
        "--role",
        "viewer",
        "--name",
        "olga",
        ONGRID_DATA_DIR=str(remote.base / "other-data2"),
    )
    assert result.exit_code == 0
    again = remote.cli(
        "token",
        "create",
        "--role",
        "viewer",
        "--name",
        "olga",
        ONGRID_DATA_DIR=str(remote.base / "other-data2"),
    )
    assert again.exit_code == 2
    assert again.stdout == ""
    assert "already named" in again.stderr


def test_token_list_shows_every_token_without_its_secret(remote: Remote) -> None:
    result = remote.cli("token", "list", "--json")
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert {(r["name"], r["role"]) for r in rows} >= {
        ("admin", "admin"),
        ("olga", "operator"),
        ("oscar", "operator"),
        ("vera", "viewer"),
    }
    assert all(r["revoked_at"] is None for r in rows)
    plain = remote.cli("token", "list")
    assert plain.exit_code == 0
    assert re.search(r"\bvera\s+viewer\b.*active", plain.stdout)
    for secret in remote.tokens.values():
        assert secret not in result.stdout
        assert secret not in plain.stdout


def test_token_revoke_by_name_or_id_on_a_stopped_data_dir(remote: Remote) -> None:
    other = {"ONGRID_DATA_DIR": str(remote.base / "revoke-data")}
    created = remote.cli("token", "create", "--init", "--role", "viewer", "--name", "temp", **other)
    assert created.exit_code == 0
    listed = json.loads(remote.cli("token", "list", "--json", **other).stdout)
    [temp] = [r for r in listed if r["name"] == "temp"]
    result = remote.cli("token", "revoke", temp["id"], **other)
    assert result.exit_code == 0
    assert "revoked" in result.stderr
    again = remote.cli("token", "revoke", "temp", **other)
    assert again.exit_code == 2
    assert "no active token" in again.stderr
    listed = json.loads(remote.cli("token", "list", "--json", **other).stdout)
    assert [r["revoked_at"] is not None for r in listed if r["name"] == "temp"] == [True]


# ---- approvals against the server ---------------------------------------------------------------
def pending_request(remote: Remote) -> dict[str, Any]:
    response = remote.http("POST", "/v1/skills/disk_clean/execute", "olga", json={"args": {}})
    assert response.status_code == 202
    return response.json()


def test_approvals_list_shows_the_pending_requests(remote: Remote) -> None:
    pending = pending_request(remote)
    result = remote.cli("approvals", "list", token=remote.tokens["vera"])
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "SKILL", "CLASS", "SIGNED", "REQUESTED", "BY", "ARGS"]
    [line] = [ln for ln in lines if pending["approval_id"] in ln]
    expected = [pending["approval_id"], "pending", "disk_clean", "mutating", "0/1", "olga", "{}"]
    assert line.split() == expected
    as_json = remote.cli("approvals", "list", "--json", token=remote.tokens["vera"])
    body = json.loads(as_json.stdout)
    assert pending["approval_id"] in [a["id"] for a in body["items"]]
    remote.http("POST", f"/v1/approvals/{pending['approval_id']}/reject", "oscar")


def test_approvals_approve_with_url_and_token_runs_the_call(remote: Remote) -> None:
    pending = pending_request(remote)
    result = remote.cli(
        "approvals",
        "approve",
        pending["approval_id"],
        "--comment",
        "go",
        token=remote.tokens["oscar"],
    )
    assert result.exit_code == 0, result.output
    approval = json.loads(result.stdout)
    assert approval["status"] == "approved"
    assert approval["signatures"][0]["comment"] == "go"
    assert remote.final(pending["id"])["status"] == "succeeded"


def test_approvals_reject_with_the_environment_variables(remote: Remote) -> None:
    pending = pending_request(remote)
    result = remote.cli(
        "approvals",
        "reject",
        pending["approval_id"],
        ONGRID_URL=remote.server.url,
        ONGRID_TOKEN=remote.tokens["oscar"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "rejected"
    assert remote.final(pending["id"])["status"] == "rejected"


def test_approving_ones_own_request_exits_3(remote: Remote) -> None:
    pending = pending_request(remote)
    result = remote.cli("approvals", "approve", pending["approval_id"], token=remote.tokens["olga"])
    assert result.exit_code == 3
    assert "forbidden" in result.stderr
    viewer = remote.cli("approvals", "approve", pending["approval_id"], token=remote.tokens["vera"])
    assert viewer.exit_code == 3
    remote.http("POST", f"/v1/approvals/{pending['approval_id']}/reject", "oscar")


def test_a_bad_token_exits_2(remote: Remote) -> None:
    for args in (("approvals", "list"), ("executions", "list"), ("executions", "show", "x")):
        result = remote.cli(*args, token="ogs_not-a-real-token")
        assert result.exit_code == 2, (args, result.output)
        assert "unauthorized" in result.stderr
        assert result.stdout == ""


def test_no_token_or_no_server_exits_2_with_a_message(remote: Remote) -> None:
    missing = remote.cli("approvals", "list", "--url", remote.server.url)
    assert missing.exit_code == 2
    assert "a token is needed" in missing.stderr
    nowhere = f"http://127.0.0.1:{free_port()}"
    unreachable = remote.cli("executions", "list", "--url", nowhere, "--token", "ogs_x")
    assert unreachable.exit_code == 2
    assert unreachable.stderr == (
        f"→ {nowhere} (--url)\n"
        f"ongrid-skills: cannot reach {nowhere}: connection refused — is `ongrid-skills serve` "
        "running? set --url or ONGRID_URL\n"
    )
    from_env = remote.cli("executions", "list", "--token", "ogs_x", ONGRID_URL=nowhere)
    assert from_env.exit_code == 2
    assert f"cannot reach {nowhere} (from ONGRID_URL): connection refused" in from_env.stderr


def test_an_unknown_approval_or_execution_exits_2(remote: Remote) -> None:
    token = remote.tokens["oscar"]
    for args in (("approvals", "approve", "nope"), ("approvals", "reject", "nope")):
        result = remote.cli(*args, token=token)
        assert result.exit_code == 2
        assert "not_found" in result.stderr
    result = remote.cli("executions", "show", "nope", token=token)
    assert result.exit_code == 2
    logs = remote.cli("executions", "logs", "nope", token=token)
    assert logs.exit_code == 2


# ---- executions against the server ------------------------------------------------------------
def test_executions_list_and_show(remote: Remote) -> None:
    ran = remote.http("POST", "/v1/skills/echo/execute", "olga", json={"args": {"k": 1}}).json()
    token = remote.tokens["vera"]
    listed = remote.cli("executions", "list", "--skill", "echo", token=token)
    assert listed.exit_code == 0, listed.output
    header, first_line, *_ = listed.stdout.splitlines()
    assert header.split() == ["ID", "CREATED", "STATUS", "SKILL", "REQUESTED", "BY"]
    first = first_line.split()
    assert first[0] == ran["id"]
    assert first[2:] == ["succeeded", "echo", "olga"]
    as_json = remote.cli("executions", "list", "--json", "--limit", "500", token=token)
    body = json.loads(as_json.stdout)
    assert body == remote.http("GET", "/v1/executions", "vera", params={"limit": 500}).json()
    filtered = remote.cli("executions", "list", "--json", "--status", "rejected", token=token)
    assert all(e["status"] == "rejected" for e in json.loads(filtered.stdout)["items"])
    shown = remote.cli(
        "executions", "show", ran["id"], ONGRID_URL=remote.server.url, ONGRID_TOKEN=token
    )
    assert shown.exit_code == 0
    assert json.loads(shown.stdout) == ran


def test_executions_logs_of_a_finished_call_prints_the_timeline(remote: Remote) -> None:
    ran = remote.http("POST", "/v1/skills/echo/execute", "olga", json={"args": {}}).json()
    result = remote.cli("executions", "logs", ran["id"], token=remote.tokens["vera"])
    assert result.exit_code == 0, result.output
    assert "echo says hi" in result.stdout.splitlines()
    assert '[status] {"status": "running", "skill": "echo"}' in result.stdout
    assert result.stderr.strip().endswith("[end] succeeded")


def test_executions_logs_without_follow_returns_at_once_while_the_call_runs(
    remote: Remote, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    started = remote.http(
        "POST",
        "/v1/skills/talker/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    ).json()

    def logs_with_the_first_line() -> Result | None:
        result = remote.cli("executions", "logs", started["id"], token=remote.tokens["vera"])
        assert result.exit_code == 0, result.output
        return result if "first line" in result.stdout else None

    # the first line is in the timeline once the skill printed it
    result = wait_for(logs_with_the_first_line, "the first line in the logs", timeout=20)
    assert "second line" not in result.stdout
    assert result.stderr.strip().endswith("[end] running")
    gate.touch()
    assert remote.final(started["id"])["status"] == "succeeded"


def test_executions_logs_follow_streams_a_line_before_the_call_ends(
    remote: Remote, tmp_path: Path
) -> None:
    """The console script with ONGRID_URL/ONGRID_TOKEN: the first stderr line of the skill is
    printed while the skill still waits for its gate; the gate opens only after it was read."""
    gate = tmp_path / "gate"
    started = remote.http(
        "POST",
        "/v1/skills/talker/execute",
        "olga",
        json={"args": {"gate": str(gate)}, "wait": False},
    ).json()
    environ = {
        "PATH": os.environ["PATH"],
        "ONGRID_URL": remote.server.url,
        "ONGRID_TOKEN": remote.tokens["vera"],
    }
    with subprocess.Popen(
        [CLI, "executions", "logs", "-f", started["id"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    ) as proc:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line.rstrip("\n"))
            if line == "first line\n":
                status = remote.http("GET", f"/v1/executions/{started['id']}", "vera").json()
                assert status["status"] == "running"
                gate.touch()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert gate.exists()
    assert "first line" in seen
    assert "second line" in seen
    assert seen.index("first line") < seen.index("second line")
    assert err.strip().endswith("[end] succeeded")


# ---- last: a CLI write on the data dir of the running server -----------------------------------
def test_token_create_while_the_server_runs_leaves_the_server_working(remote: Remote) -> None:
    result = remote.cli("token", "create", "--role", "viewer", "--name", "late")
    assert result.exit_code == 0
    late = result.stdout.strip()
    response = httpx.get(
        f"{remote.server.url}/v1/skills", headers={"Authorization": f"Bearer {late}"}, timeout=10
    )
    assert response.status_code == 200
    ran = remote.http("POST", "/v1/skills/echo/execute", "olga", json={"args": {}})
    assert ran.status_code == 200, ran.text
    assert remote.http("GET", "/v1/audit/verify", "admin").json()["ok"] is True


def test_serve_says_serving_only_once_bound_and_names_a_busy_address(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = {"PATH": os.environ["PATH"], "ONGRID_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run(
            [CLI, "-q", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
    assert done.returncode == 1
    assert "serving on" not in done.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_graceful_stop_prints_a_line_and_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    process = start_serve(tmp_path / "data", {}, startup_lines=2)
    rest = stop(process, sig)
    assert process.proc.returncode == 0
    assert f"ongrid-skills: stopped ({sig.name})" in rest


def test_a_command_talking_to_the_server_prints_no_library_log_lines(tmp_path: Path) -> None:
    process = start_serve(tmp_path / "data", {}, startup_lines=2)
    try:
        token = (tmp_path / "data" / "first-admin-token").read_text().strip()
        env = {"PATH": os.environ["PATH"], "ONGRID_URL": process.url, "ONGRID_TOKEN": token}
        done = subprocess.run(
            [CLI, "approvals", "list"], capture_output=True, text=True, env=env, timeout=60
        )
    finally:
        stop(process)
    assert done.returncode == 0, done.stderr
    assert "HTTP Request" not in done.stderr
    assert "INFO" not in done.stderr
