"""``run NAME --server`` (or with ONGRID_URL set) against a real ``serve``: submitted through the
REST API, followed live, the result printed verbatim, the exit codes of SPEC §13 — 4 with the
approval id when approval is needed, and with ``--wait`` the code of the call once approved."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.doors.cli import remote
from tests.support.proxy import proxy_to
from tests.support.served import Served, serve_for_cli
from tests.support.server import stop
from tests.support.skills import write_skill
from tests.support.sockets import free_port

ECHO_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "dry_run": {"type": "boolean"},
        "keep": {"type": "integer"},
        "ratio": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "limits": {"type": "object"},
        "note": {"type": ["string", "null"]},
        "gate": {"type": "string"},
    },
    "additionalProperties": False,
}
#: The skill's stdout, spaced and spelled as no JSON serialiser would: printed as it is.
ODD = '{ "b" : 1.50,\n  "a" : [1e3, "\\u00e9"] }'
TALKER = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo 'first line' >&2
echo '{"progress": 1, "total": 2, "message": "half way"}' >&2
while [ ! -e "$gate" ]; do sleep 0.01; done
echo 'second line' >&2
echo '{"done": true}'
"""


def write_skills(root: Path) -> None:
    write_skill(root, "echo", "#!/bin/sh\necho 'echo says hi' >&2\nexec cat\n", schema=ECHO_SCHEMA)
    write_skill(root, "odd", f"#!/bin/sh\ncat >/dev/null\nprintf '%s' '{ODD}'\n")
    write_skill(root, "talker", TALKER, schema=ECHO_SCHEMA)
    write_skill(root, "fail", "#!/bin/sh\ncat >/dev/null\necho oops >&2\nexit 1\n")
    write_skill(root, "slow", "#!/bin/sh\ncat >/dev/null\nsleep 30\n", timeout_seconds=1)
    write_skill(root, "disk_clean", **{"class": "mutating"})
    write_skill(root, "reboot", **{"class": "dangerous"})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    running = serve_for_cli(tmp_path_factory.mktemp("remote-run"), write_skills)
    try:
        yield running
    finally:
        stop(running.process)


def count(served: Served, skill: str) -> int:
    answer = served.http("GET", "/v1/executions", params={"skill": skill, "limit": 500})
    return len(answer.json()["items"])


def last(served: Served, skill: str) -> dict[str, Any]:
    answer = served.http("GET", "/v1/executions", params={"skill": skill, "limit": 1})
    body: dict[str, Any] = answer.json()["items"][0]
    return body


# ---- a call that runs ------------------------------------------------------------------------
def test_with_ongrid_url_set_run_goes_to_the_server_and_prints_the_result_verbatim(
    served: Served,
) -> None:
    result = served.cli("run", "odd")
    assert result.exit_code == 0, result.output
    assert result.stdout == ODD + "\n"
    assert last(served, "odd")["requested_by"] == "olga"  # it ran on the server, as olga


def test_server_with_url_and_token_options(served: Served) -> None:
    options = ["--server", "--url", served.url, "--token", served.tokens["oscar"]]
    result = served.cli("run", "echo", '{"keep": 1}', *options, who=None, url="http://nowhere:1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"keep": 1}
    assert result.stderr == f"→ {served.url} (--url)\necho says hi\n"
    assert last(served, "echo")["requested_by"] == "oscar"


def test_local_runs_here_even_with_ongrid_url_set(served: Served, tmp_path: Path) -> None:
    write_skill(tmp_path, "here_only")
    result = served.cli("-d", str(tmp_path), "-q", "run", "here_only", "--local")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"ok": True}
    assert served.cli("run", "here_only", "--local", "--server").exit_code == 2


def test_json_prints_the_whole_execution_as_the_server_has_it(served: Served) -> None:
    result = served.cli("run", "odd", "--json")
    assert result.exit_code == 0, result.output
    execution = json.loads(result.stdout)
    answer = served.http("GET", f"/v1/executions/{execution['id']}")
    assert result.stdout == answer.text + "\n"
    assert execution["status"] == "succeeded"


def test_args_from_stdin(served: Served) -> None:
    result = served.cli("run", "echo", "-", input='{"path": "/tmp", "keep": 2}')
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"path": "/tmp", "keep": 2}


def test_stderr_lines_and_progress_stream_before_the_call_ends(
    served: Served, tmp_path: Path
) -> None:
    """The console script: the first line and the progress are on the CLI's stderr while the
    skill still waits for its gate; the gate opens only once they were read."""
    gate = tmp_path / "gate"
    with served.script("run", "talker", f"gate={gate}") as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("→ ")  # where it went
        assert proc.stderr.readline() == "first line\n"
        assert proc.stderr.readline() == "[progress 1/2] half way\n"
        assert not gate.exists()
        gate.touch()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"done": True}
    assert err == "second line\n"


@pytest.mark.parametrize(
    ("skill", "code", "message"),
    [("fail", 1, "fail failed"), ("slow", 124, "slow timed_out")],
)
def test_a_failed_or_timed_out_call_exits_with_its_code(
    served: Served, skill: str, code: int, message: str
) -> None:
    result = served.cli("run", skill)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert message in result.stderr


def test_invalid_args_exit_2_with_the_servers_error_in_json(served: Served) -> None:
    result = served.cli("run", "echo", '{"keep": "x"}', "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "invalid_args"
    assert "invalid_args" in result.stderr


def test_an_unknown_skill_exits_2(served: Served) -> None:
    result = served.cli("run", "no_such_skill")
    assert result.exit_code == 2
    assert "not_found" in result.stderr


# ---- args as KEY=VALUE, typed from the server's schema --------------------------------------
def test_key_value_pairs_are_typed_from_the_servers_schema(served: Served) -> None:
    result = served.cli(
        "run",
        "echo",
        "path=/var/tmp",
        "dry_run=false",
        "keep=3",
        "ratio=0.5",
        "tags=a",
        "tags=b c",
        "limits:={}",
        "note=null",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "path": "/var/tmp",
        "dry_run": False,
        "keep": 3,
        "ratio": 0.5,
        "tags": ["a", "b c"],
        "limits": {},
        "note": None,
    }


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["keep=three"], "'keep=three': 'three' is not an integer"),
        (["dry_run=maybe"], "'dry_run=maybe': 'maybe' is not a boolean"),
        (["size=1"], "echo has no arg 'size' (its args: dry_run, gate, keep, limits, note"),
        (["keep=1", "keep=2"], "'keep' is given twice"),
        (["limits=x"], "give an object as KEY:=JSON"),
        (["limits:={"], "the value after := is not JSON"),
        (["keep=1", '{"a": 1}'], "is not KEY=VALUE"),
    ],
)
def test_malformed_pairs_exit_2_and_nothing_is_submitted(
    served: Served, words: list[str], message: str
) -> None:
    before = count(served, "echo")
    result = served.cli("run", "echo", *words)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stdout == ""
    assert count(served, "echo") == before


# ---- approvals -------------------------------------------------------------------------------
def test_a_call_that_needs_approval_exits_4_naming_the_request(served: Served) -> None:
    result = served.cli("run", "disk_clean")
    assert result.exit_code == 4, result.output
    pending = last(served, "disk_clean")
    approval_id = pending["approval_id"]
    assert pending["status"] == "pending_approval"
    assert f"request {approval_id}, 0 of 1 signature(s)" in result.stderr
    assert f"ongrid-skills approvals approve {approval_id}" in result.stderr
    assert "--yes to confirm it yourself" in result.stderr
    as_json = served.cli("run", "disk_clean", "--json")
    assert as_json.exit_code == 4
    body = json.loads(as_json.stdout)
    assert (body["status"], len(body["approval_id"])) == ("pending_approval", 32)
    for ident in (approval_id, body["approval_id"]):
        served.http("POST", f"/v1/approvals/{ident}/reject", "oscar")


def test_yes_is_the_confirmation_of_a_mutating_call(served: Served) -> None:
    result = served.cli("run", "disk_clean", "--yes")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"ok": True}


def test_a_dangerous_call_waits_for_a_second_signer_and_break_glass_is_refused(
    served: Served,
) -> None:
    before = count(served, "reboot")
    refused = served.cli("run", "reboot", "--yes", "--i-know-it-is-dangerous", "--json")
    assert refused.exit_code == 2
    assert "--i-know-it-is-dangerous is for local runs only" in refused.stderr
    assert json.loads(refused.stdout)["error"]["code"] == "invalid_request"
    assert count(served, "reboot") == before
    result = served.cli("run", "reboot", "--yes", who="admin")
    assert result.exit_code == 4, result.output
    assert "1 of 2 signature(s)" in result.stderr  # the admin's --yes is the first
    served.http("POST", f"/v1/approvals/{last(served, 'reboot')['approval_id']}/reject", "admin2")


def test_wait_blocks_until_the_approval_lands_then_exits_with_the_calls_code(
    served: Served,
) -> None:
    with served.script("run", "disk_clean", "--wait") as proc:
        assert proc.stderr is not None
        seen = [proc.stderr.readline() for _ in range(5)]
        assert seen.pop(0) == f"→ {served.url} (ONGRID_URL)\n"
        assert "waiting for the approval" in seen[-1], seen
        approval_id = last(served, "disk_clean")["approval_id"]
        assert approval_id in seen[0]
        approved = served.http("POST", f"/v1/approvals/{approval_id}/approve", "oscar")
        assert approved.status_code == 200
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"ok": True}
    assert "approved; running" in err


def test_wait_on_a_rejected_request_exits_3(served: Served) -> None:
    with served.script("run", "disk_clean", "--wait") as proc:
        assert proc.stderr is not None
        while "waiting for the approval" not in proc.stderr.readline():
            pass
        approval_id = last(served, "disk_clean")["approval_id"]
        body = {"comment": "not today"}
        served.http("POST", f"/v1/approvals/{approval_id}/reject", "oscar", json=body)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    assert out == ""
    assert "disk_clean rejected (rejected: not today)" in err


def test_ctrl_c_while_waiting_exits_4_and_leaves_the_request_pending(served: Served) -> None:
    with served.script("run", "disk_clean", "--wait") as proc:
        assert proc.stderr is not None
        while "waiting for the approval" not in proc.stderr.readline():
            pass
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 4, err
    assert "stays pending" in err
    pending = last(served, "disk_clean")
    assert pending["status"] == "pending_approval"
    served.http("POST", f"/v1/approvals/{pending['approval_id']}/reject", "oscar")


def test_wait_on_an_expired_request_exits_3(tmp_path: Path) -> None:
    short = serve_for_cli(tmp_path, write_skills, ONGRID_APPROVAL_TTL_SECONDS="1")
    try:
        result = short.cli("run", "disk_clean", "--wait")
    finally:
        stop(short.process)
    assert result.exit_code == 3, result.output
    assert "disk_clean expired (expired: the request expired)" in result.stderr


def test_wait_is_for_runs_on_a_server(tmp_path: Path) -> None:
    write_skill(tmp_path, "here_only")
    from click.testing import CliRunner

    from ongrid_skills.doors.cli.main import cli

    result = CliRunner().invoke(cli, ["-d", str(tmp_path), "run", "here_only", "--wait"])
    assert result.exit_code == 2
    assert "--wait is for runs on a server" in result.stderr


# ---- hostile: tokens, an absent server, broken streams ----------------------------------------
def test_a_bad_or_missing_token_exits_2_and_runs_nothing(served: Served) -> None:
    before = count(served, "echo")
    bad = served.cli("run", "echo", "--token", "ogs_not-a-real-token")
    assert bad.exit_code == 2
    assert "unauthorized" in bad.stderr
    assert bad.stdout == ""
    missing = served.cli("run", "echo", who=None)
    assert missing.exit_code == 2
    assert "a token is needed" in missing.stderr
    assert count(served, "echo") == before


def test_an_unreachable_server_exits_2_naming_its_url(served: Served) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    result = served.cli("run", "echo", url=nowhere)
    assert result.exit_code == 2
    assert f"cannot reach {nowhere} (from ONGRID_URL): connection refused" in result.stderr


def test_a_stream_cut_mid_run_is_resumed_without_a_line_twice(
    served: Served, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    port = int(served.url.rsplit(":", 1)[1])
    with proxy_to(port) as proxy:
        proxy.cut_after(b"half way")  # the stream breaks just after the progress event
        with served.script("run", "talker", f"gate={gate}", url=proxy.url) as proc:
            assert proc.stderr is not None
            assert proc.stderr.readline().startswith("→ ")  # where it went
            assert proc.stderr.readline() == "first line\n"
            assert proc.stderr.readline() == "[progress 1/2] half way\n"
            assert "reconnecting to" in proc.stderr.readline()
            gate.touch()
            out, err = proc.communicate(timeout=30)
        assert proxy.cuts == 1
    assert proc.returncode == 0, err
    assert json.loads(out) == {"done": True}
    assert err.splitlines() == ["ongrid-skills: reconnected", "second line"]


def test_a_server_gone_for_good_mid_run_exits_2_saying_how_to_follow_the_call(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote, "RECONNECT_SECONDS", 0.5)
    gate = tmp_path / "gate"
    port = int(served.url.rsplit(":", 1)[1])
    with proxy_to(port) as proxy:
        proxy.cut_after(b"half way", for_good=True)
        result = served.cli("run", "talker", f"gate={gate}", url=proxy.url)
    gate.touch()
    assert result.exit_code == 2, result.stderr
    execution = last(served, "talker")
    assert f"ongrid-skills executions logs -f {execution['id']}" in result.stderr
    assert "gave up after 0.5 s" in result.stderr
    assert served.final(execution["id"])["status"] == "succeeded"  # it went on, server-side


def test_ctrl_c_while_a_call_runs_exits_130_and_the_call_goes_on(
    served: Served, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with served.script("run", "talker", f"gate={gate}") as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("→ ")  # where it went
        assert proc.stderr.readline() == "first line\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    execution = last(served, "talker")
    assert f"ongrid-skills executions cancel {execution['id']}" in err
    assert execution["status"] == "running"
    gate.touch()
    assert served.final(execution["id"])["status"] == "succeeded"
