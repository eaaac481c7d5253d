"""``ongrid-skills credentials``: values from stdin or files only, never shown, bound by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from subprocess import CompletedProcess
from typing import ClassVar

from tests.support.cli import run_cli
from tests.support.http import QuietHandler, serve
from tests.support.leaks import files_holding
from tests.support.skills import write_skill

SECRET = "s3cr3t-value-from-stdin"
SLOT = {
    "slot": "api",
    "fields": ["token"],
    "inject": {"env": {"API_TOKEN": "{{token}}"}},
}


def data_env(tmp_path: Path) -> dict[str, str]:
    return {
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(tmp_path / "skills"),
    }


def cli(tmp_path: Path, *args: str, stdin: str | None = None) -> CompletedProcess[str]:
    return run_cli("--data-dir", str(tmp_path / "data"), *args, stdin=stdin, **data_env(tmp_path))


def test_create_reads_the_value_from_stdin_and_list_never_shows_it(tmp_path: Path) -> None:
    created = cli(tmp_path, "credentials", "create", "github", "--value", "token", stdin=SECRET)
    assert created.returncode == 0, created.stderr
    assert "created github (token)" in created.stderr
    listed = cli(tmp_path, "credentials", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["fields"]) for r in rows] == [("github", {"token": "stored"})]
    assert SECRET not in listed.stdout + listed.stderr + created.stdout + created.stderr
    table = cli(tmp_path, "credentials", "list")
    assert "github" in table.stdout
    assert files_holding(tmp_path / "data", SECRET) == []


def test_a_value_is_never_taken_from_the_command_line(tmp_path: Path) -> None:
    given = cli(tmp_path, "credentials", "create", "github", "--value", f"token={SECRET}", stdin="")
    assert given.returncode == 2
    assert "read from standard input, never argv" in given.stderr
    assert SECRET not in given.stdout + given.stderr
    listed = cli(tmp_path, "credentials", "list", "--json")
    assert json.loads(listed.stdout or "[]") == []


def test_values_come_from_files_and_json_on_stdin(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("from-a-file-value\n")
    made = cli(
        tmp_path,
        "credentials",
        "create",
        "cloud",
        "--value-file",
        f"secret_key={tmp_path / 'key'}",
        "--json",
        stdin=json.dumps({"secret_id": "the-id-value"}),
    )
    assert made.returncode == 0, made.stderr
    listed = json.loads(cli(tmp_path, "credentials", "list", "--json").stdout)
    assert listed[0]["fields"] == {"secret_id": "stored", "secret_key": "stored"}


def test_a_short_value_is_refused_with_the_reason(tmp_path: Path) -> None:
    made = cli(tmp_path, "credentials", "create", "short", "--value", "token", stdin="12345")
    assert made.returncode == 2
    assert "cannot be masked safely" in made.stderr


def test_bind_and_unbind_name_the_skill_and_slot(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "api_call", credentials=[SLOT])
    cli(tmp_path, "credentials", "create", "github", "--value", "token", stdin=SECRET)
    bound = cli(tmp_path, "credentials", "bind", "github", "--skill", "api_call", "--slot", "api")
    assert bound.returncode == 0, bound.stderr
    assert "bound github to slot api of skill api_call" in bound.stderr
    wrong = cli(tmp_path, "credentials", "bind", "github", "--skill", "api_call", "--slot", "x")
    assert wrong.returncode == 2
    assert "has no credential slot 'x'" in wrong.stderr
    refused = cli(tmp_path, "credentials", "delete", "github")
    assert refused.returncode == 2
    assert "unbind it first" in refused.stderr
    unbound = cli(tmp_path, "credentials", "unbind", "--skill", "api_call", "--slot", "api")
    assert unbound.returncode == 0, unbound.stderr
    assert cli(tmp_path, "credentials", "delete", "github").returncode == 0


API_SKILL = f"""#!{sys.executable}
import json, os, sys, urllib.request, base64
args = json.load(sys.stdin)
token = os.environ["API_TOKEN"]
with open(os.path.join(os.environ["CREDENTIALS_DIRECTORY"], "token")) as f:
    assert f.read() == token
request = urllib.request.Request(args["url"], headers={{"Authorization": "Bearer " + token}})
with urllib.request.urlopen(request, timeout=5) as answer:
    status = answer.status
sys.stderr.write("calling with " + token + "\\n")
sys.stderr.write(base64.b64encode(token.encode()).decode() + "\\n")
print(json.dumps({{"status": status, "echo": token, "dir": os.environ["CREDENTIALS_DIRECTORY"]}}))
"""


class TokenChecker(QuietHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        TokenChecker.seen.append(self.headers.get("Authorization", ""))
        ok = self.headers.get("Authorization") == f"Bearer {SECRET}"
        self.send_body(200 if ok else 401, b"{}", "application/json")


def test_a_local_run_calls_an_api_with_its_token_and_prints_it_nowhere(tmp_path: Path) -> None:
    slot = {
        **SLOT,
        "inject": {**SLOT["inject"], "files": [{"path": "token", "content": "{{token}}"}]},
    }
    write_skill(tmp_path / "skills", "api_call", API_SKILL, credentials=[slot])
    cli(tmp_path, "credentials", "create", "github", "--value", "token", stdin=SECRET)
    cli(tmp_path, "credentials", "bind", "github", "--skill", "api_call", "--slot", "api")
    with serve(TokenChecker) as server:
        url = f"http://127.0.0.1:{server.server_port}/user"
        done = cli(tmp_path, "run", "api_call", "--json", json.dumps({"url": url}))
    assert done.returncode == 0, done.stderr
    assert TokenChecker.seen == [f"Bearer {SECRET}"]
    execution = json.loads(done.stdout)
    assert execution["result"]["status"] == 200
    assert execution["result"]["echo"] == "***"
    assert execution["credentials"] == {"api": "github"}
    assert SECRET not in done.stdout + done.stderr
    assert not Path(execution["result"]["dir"]).exists()  # removed once the call ended
    assert files_holding(tmp_path / "data", SECRET) == []


def test_a_local_run_of_a_skill_with_an_unbound_slot_is_refused(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "api_call", credentials=[SLOT])
    cli(tmp_path, "credentials", "list")  # makes the data dir's store
    done = cli(tmp_path, "run", "api_call", "{}")
    assert done.returncode == 3
    assert "needs credential for slot api" in done.stderr


def test_show_lists_a_skills_slots_without_any_value(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "api_call", credentials=[SLOT])
    shown = cli(tmp_path, "show", "api_call")
    assert shown.returncode == 0, shown.stderr
    assert "credential:" in shown.stdout
    assert "api (api): token → API_TOKEN" in shown.stdout
