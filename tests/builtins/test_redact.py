"""Secrets never reach a viewer through list_processes, read_journal or tail_file.

A real child process whose command line holds a token and a password; a fake ``journalctl``
printing the server's first-start line; a real log file.
"""

from __future__ import annotations

import asyncio
import doctest
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.builtins import redact as redact_module
from ongrid_skills.builtins.base import BuiltinContext, Reach
from ongrid_skills.builtins.files import tail_file
from ongrid_skills.builtins.journal import read_journal
from ongrid_skills.builtins.procs import list_processes
from ongrid_skills.builtins.redact import REDACTED, mask_secrets, redact

TOKEN = "ogs_Q2hhbmdlTWVQbGVhc2UxMjM0NTY3ODkwYWJjZGVm"
MARK = "redact-mark-7781"


def test_redact_doctests() -> None:
    assert doctest.testmod(redact_module).failed == 0


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (f"ongrid-skills approvals approve 01ab --token {TOKEN}", TOKEN),
        (f"ongrid-skills executions list --token={TOKEN}", TOKEN),
        ("mysql -u app --password=s3cr3t-pw -h db", "s3cr3t-pw"),
        ("app --db-password hunter22 --verbose", "hunter22"),
        ("DB_PASSWORD='hunter 2' ./start", "hunter 2"),
        ("GET /cb?access_token=abc123xyz&x=1", "abc123xyz"),
        ("curl -H Authorization: Bearer eyJhbGciOi.payload.sig https://api", "eyJhbGciOi"),
        ("proxy-authorization=Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("X-Api-Key: k_live_123456", "k_live_123456"),
        ('{"client_secret": "shh-it-is-secret"}', "shh-it-is-secret"),
        ("redis://default:pa55word@cache:6379/0", "pa55word"),
        (f"accepted {TOKEN} for admin", TOKEN[4:]),
    ],
)
def test_secret_shapes_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED]" in out


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ('{"password": "ab\\"cd-s3cr3t"}', "cd-s3cr3t"),  # an escaped quote inside
        ('{"api_key": 424242424242, "user": "ada"}', "424242424242"),
        ('{"TOKEN": ["k-first", "k-second"]}', "k-second"),
        ('{"client_secret": {"v": "k-inner", "n": 1}}', "k-inner"),
        ('{"db_password": true}', "true"),
        ('{"pass\\u0077ord": "k-escaped-name"}', "k-escaped-name"),
        ('{"Db-Password": "caf\\u00e9-k-unicode"}', "k-unicode"),
        ('{"hosts": [{"name": "a", "access_token": "k-in-a-list"}]}', "k-in-a-list"),
        ('{"password": "k-cut-short', "k-cut-short"),  # a line cut inside the value
    ],
)
def test_a_json_member_under_a_secret_name_is_redacted_whatever_its_value(
    text: str, secret: str
) -> None:
    out = redact(text)
    assert secret not in out
    assert '"[REDACTED]"' in out


def test_a_json_member_keeps_the_text_around_its_redacted_value() -> None:
    text = 'login {"user": "ada", "password": {"a": [1, "x\\"y"]}, "port": 5432} done'
    assert redact(text) == 'login {"user": "ada", "password": "[REDACTED]", "port": 5432} done'


def test_masking_a_value_masks_whatever_a_secret_looking_key_holds() -> None:
    args = {
        "target": "db-01",
        "PASSWORD": 1234,
        "Api-Key": ["k-1", {"k": "k-2"}],
        "nested": {"hosts": [{"name": "a", "access_token": {"v": "k-3"}}], "on": True},
        "headers": {"Authorization": "Bearer k-4", "Accept": "text/plain"},
        "dsn": "postgresql://app:k-5@db/app",
        "note": "run with --token k-6",
        "pwd": None,
        "count": 3,
    }
    assert mask_secrets(args) == {
        "target": "db-01",
        "PASSWORD": REDACTED,
        "Api-Key": REDACTED,
        "nested": {"hosts": [{"name": "a", "access_token": REDACTED}], "on": True},
        "headers": {"Authorization": REDACTED, "Accept": "text/plain"},
        "dsn": f"postgresql://app:{REDACTED}@db/app",
        "note": f"run with --token {REDACTED}",
        "pwd": REDACTED,
        "count": 3,
    }
    assert args["PASSWORD"] == 1234  # the value given is left as it was


def test_ordinary_text_is_left_alone() -> None:
    for text in ("nginx: worker process", "--tokens-per-second 5 --verbose", "password reset sent"):
        assert redact(text) == text


@pytest.fixture
def secret_process() -> Iterator[subprocess.Popen[bytes]]:
    code = "import sys, time; time.sleep(120)"
    argv = [sys.executable, "-c", code, MARK, "--token", TOKEN, "password=hunter22"]
    proc = subprocess.Popen(argv)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_list_processes_redacts_command_lines(secret_process: subprocess.Popen[bytes]) -> None:
    def run(**args: Any) -> dict[str, Any]:
        result: dict[str, Any] = asyncio.run(list_processes(BuiltinContext(), **args))
        return result

    mine = [p for p in run(name_contains=MARK)["processes"] if p["pid"] == secret_process.pid]
    assert len(mine) == 1
    cmdline = mine[0]["cmdline"]
    assert MARK in cmdline
    assert TOKEN not in cmdline
    assert "hunter22" not in cmdline
    assert "--token [REDACTED]" in cmdline
    # The filter sees only the redacted text: no guessing a token one character at a time.
    assert run(name_contains=TOKEN[:10])["processes"] == []
    assert run(name_contains="hunter2")["processes"] == []


def test_read_journal_redacts_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "journalctl"
    line = (
        '{"MESSAGE": "ongrid-skills: first start, admin token (shown once, keep it): '
        + TOKEN
        + '", "_SYSTEMD_UNIT": "ongrid.service"}'
    )
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{line}\nEOF\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    result: dict[str, Any] = asyncio.run(read_journal(BuiltinContext()))
    [entry] = result["entries"]
    assert TOKEN not in entry["message"]
    assert entry["message"].startswith("ongrid-skills: first start, admin token")


def test_tail_file_redacts_lines(tmp_path: Path) -> None:
    log = tmp_path / "old-server.log"
    log.write_text(f"first start, admin token (shown once, keep it): {TOKEN}\nready\n")
    ctx = BuiltinContext(reach=Reach(read_roots=(str(tmp_path),)))
    result: dict[str, Any] = asyncio.run(tail_file(ctx, path=str(log)))
    assert TOKEN not in "\n".join(result["lines"])
    assert result["lines"][1] == "ready"
