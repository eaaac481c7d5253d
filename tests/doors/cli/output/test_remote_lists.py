"""The lists of the data dir (`token list`, `audit list`) and of a server (`approvals list`,
`executions list`) at a terminal and in a pipe, against one real `serve`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import yaml

from tests.support.server import ServeProcess, start_serve, stop
from tests.support.skills import write_skill
from tests.support.terminal import in_terminal, piped


@dataclass
class Served:
    server: ServeProcess
    admin: str
    pending: dict[str, Any]
    finished: dict[str, Any]

    @property
    def arrow(self) -> str:
        """What a command talking to the server says first, on stderr."""
        return f"→ {self.server.url} (ONGRID_URL)"

    @property
    def env(self) -> dict[str, str]:
        """For the data dir commands and, with ONGRID_URL/ONGRID_TOKEN, the remote ones."""
        return {
            "ONGRID_DATA_DIR": str(self.server.data_dir),
            "ONGRID_URL": self.server.url,
            "ONGRID_TOKEN": self.admin,
        }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("lists")
    skills = base / "skills"
    write_skill(skills, "disk_clean", **{"class": "mutating"})
    write_skill(skills, "echo", "#!/bin/sh\nexec cat\n")
    server = start_serve(
        base / "data", {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills)}, startup_lines=2
    )
    try:
        admin = (base / "data" / "first-admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {admin}"}

        def post(skill: str) -> dict[str, Any]:
            url = f"{server.url}/v1/skills/{skill}/execute"
            body: dict[str, Any] = httpx.post(url, json={"args": {}}, headers=headers).json()
            return body

        yield Served(server, admin, post("disk_clean"), post("echo"))
    finally:
        stop(server)


def same_data(served: Served, *command: str) -> None:
    """`-o yaml` says what `--json` says; `-o json` is `--json` byte for byte."""
    as_json = piped(*command, "--json", env=served.env)
    assert as_json.returncode == 0, as_json.stderr
    assert piped(*command, "-o", "json", env=served.env).stdout == as_json.stdout
    as_yaml = piped(*command, "-o", "yaml", env=served.env)
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_approvals_list_at_a_terminal_and_in_a_pipe(served: Served) -> None:
    screen = in_terminal("approvals", "list", env=served.env)
    assert screen.status == 0, screen.text
    arrow, header, _rule, *rows = screen.text.splitlines()
    assert arrow == served.arrow
    assert header.split() == ["ID", "STATUS", "SKILL", "CLASS", "SIGNED", "REQUESTED", "BY", "ARGS"]
    [row] = [r for r in rows if served.pending["approval_id"] in r]
    assert row.split()[1:6] == ["pending", "disk_clean", "mutating", "0/1", "admin"]
    assert re.search(r"\x1b\[[0-9;]*mmutating", screen.raw)
    same_data(served, "approvals", "list")
    none = piped("approvals", "list", "--status", "expired", env=served.env)
    assert none.returncode == 0
    assert (none.stdout, none.stderr) == (b"", f"{served.arrow}\nno expired approvals\n".encode())


def test_executions_list_at_a_terminal_and_in_a_pipe(served: Served) -> None:
    screen = in_terminal("executions", "list", "--skill", "echo", env=served.env)
    assert screen.status == 0, screen.text
    arrow, header, _rule, row, *_ = screen.text.splitlines()
    assert arrow == served.arrow
    assert header.split() == ["ID", "CREATED", "STATUS", "SKILL", "REQUESTED", "BY"]
    assert row.split()[0] == served.finished["id"]
    same_data(served, "executions", "list")
    none = piped("executions", "list", "--skill", "no_such_skill", env=served.env)
    expected = f"{served.arrow}\nno executions match\n".encode()
    assert (none.returncode, none.stdout, none.stderr) == (0, b"", expected)


def test_token_list_at_a_terminal_and_in_a_pipe(served: Served) -> None:
    screen = in_terminal("token", "list", env=served.env)
    assert screen.status == 0, screen.text
    header, _rule, row = screen.text.splitlines()
    assert header.split() == ["ID", "NAME", "ROLE", "CREATED", "STATE"]
    assert row.split()[1:3] == ["admin", "admin"] and row.split()[-1] == "active"
    assert re.search(r"\x1b\[[0-9;]*mactive", screen.raw)
    assert served.admin not in screen.raw
    same_data(served, "token", "list")


def test_audit_list_at_a_terminal_and_in_a_pipe(served: Served) -> None:
    wide = in_terminal("audit", "list", env=served.env, width=200)
    assert wide.status == 0, wide.text
    lines = wide.text.splitlines()
    assert lines[0].split() == ["SEQ", "TIME", "ACTOR", "ACTION", "SUBJECT", "DATA"]
    [requested] = [line for line in lines if "approval.requested" in line]
    assert served.pending["approval_id"] in requested
    # On 100 columns the same rows stay one line each: the data and the time give way with
    # "…", the ids do not.
    narrow = in_terminal("audit", "list", env=served.env, width=100)
    rows = narrow.text.splitlines()[2:]
    assert len(rows) == len(lines) - 2
    assert all(len(row) <= 100 for row in rows)
    assert any(served.pending["approval_id"] in row for row in rows)
    same_data(served, "audit", "list")
    none = piped("audit", "list", "--action", "no.such.action", env=served.env)
    assert (none.returncode, none.stdout) == (0, b"")
    assert none.stderr == b"no audit entries for no.such.action\n"
