"""`ongrid-skills chat` as a script or a human at a terminal uses it: a real process each time."""

from __future__ import annotations

import getpass
import json
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

from ongrid_skills.agent.runs import RunStore
from ongrid_skills.runtime import DataDirLock
from ongrid_skills.settings import Settings
from ongrid_skills.store import open_store
from tests.support.agent import envelope, llm_env
from tests.support.llm import FakeLLM, Reply, call
from tests.support.processes import CLI
from tests.support.skills import MakeSkill, write_persona
from tests.support.sockets import free_port

NOISY = "#!/bin/sh\ncat >/dev/null\necho 'scanning /var' >&2\necho '{\"used_pct\": 91}'\n"
ECHO = (
    "#!/bin/sh\ninput=$(cat)\nprintf '%s\\n' \"$input\" >> calls.log\nprintf '%s\\n' \"$input\"\n"
)


def environ(tmp_path: Path, skills_root: Path, fake: FakeLLM, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root),
        "ONGRID_PERSONAS_DIRS": str(tmp_path / "personas"),
        **llm_env(fake),
        **extra,
    }


def chat(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "-q", "chat", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_one_shot_prints_the_final_answer_and_shows_the_tool_calls_live_on_stderr(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("disk_usage", NOISY)
    fake.add(Reply(calls=[call("disk_usage", {"path": "/var"})]), Reply("/var is 91% full."))
    done = chat(environ(tmp_path, skills_root, fake), "-m", "how full is /var?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "/var is 91% full.\n"
    assert "disk_usage" in done.stderr and "scanning /var" in done.stderr
    assert fake.results_by_tool(1) == {"disk_usage": '{"used_pct": 91}'}


def test_one_shot_json_prints_the_whole_transcript(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("disk_usage", NOISY)
    fake.add(Reply("Checking.", [call("disk_usage")]), Reply("91%."))
    done = chat(environ(tmp_path, skills_root, fake), "-m", "disk?", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["status"] == "done" and body["final_answer"] == "91%."
    assert body["requested_by"].startswith("cli:") and body["persona"] == "default"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert body["messages"][0]["text"] == "disk?"
    assert body["messages"][1]["tool_calls"][0]["name"] == "disk_usage"
    assert body["messages"][2]["content"] == '{"used_pct": 91}'


def test_provider_problems_and_usage_errors_exit_non_zero_with_a_clear_message(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    env = environ(tmp_path, skills_root, fake)
    down = f"http://127.0.0.1:{free_port()}/v1"
    done = chat({**env, "ONGRID_LLM_BASE_URL": down}, "-m", "hello")
    assert done.returncode == 1
    assert f"provider unreachable at {down}" in done.stderr
    done = chat(env, "-m", "hello", "--persona", "ghost")
    assert done.returncode == 2
    assert "unknown persona 'ghost'" in done.stderr


def test_one_shot_without_a_terminal_sends_mutating_calls_to_the_approval_inbox(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    folder = make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    fake.add(Reply(calls=[call("set_flag", {"flag": "on"})]), Reply("Nobody approved it."))
    # Nobody answers in time: the request expires and the model is told so.
    env = environ(tmp_path, skills_root, fake, ONGRID_APPROVAL_TTL_SECONDS="1")
    done = chat(env, "-m", "turn it on", "--persona", "fixer")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Nobody approved it.\n"
    assert "waits for approval" in done.stderr
    assert envelope(fake.results_by_tool(1)["set_flag"])["error"]["code"] == "expired"
    assert not (folder / "calls.log").exists()
    store = open_store(str(tmp_path / "data"))
    try:
        (approval,) = store.approvals.with_status("expired")
        assert approval.requested_by.startswith("agent:")
    finally:
        store.close()


def test_a_human_at_the_terminal_confirms_a_mutating_call_inline(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    folder = make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    fake.add(
        Reply(calls=[call("set_flag", {"flag": "on"})]),
        Reply(calls=[call("set_flag", {"flag": "off"})]),
        Reply("Set on; off was declined."),
    )
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [CLI, "-q", "chat", "--persona", "fixer", "-m", "flip the flag"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ(tmp_path, skills_root, fake),
    )
    os.close(slave)
    try:
        for answer in (b"y\n", b"n\n"):
            waited = wait_for_prompt(proc, b"[y/N]")
            assert b"set_flag" in waited
            os.write(master, answer)
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out == b"Set on; off was declined.\n"
    assert (folder / "calls.log").read_text() == '{"flag":"on"}\n'
    assert fake.results_by_tool(1) == {"set_flag": '{"flag":"on"}'}
    declined = envelope(fake.results_by_tool(2)["set_flag"])
    assert declined["error"]["code"] == "rejected"
    store = open_store(str(tmp_path / "data"))
    try:
        started = [e for e in store.audit.entries(limit=100) if e["action"] == "execution.started"]
        assert [e["actor"] for e in started] == [f"cli:{getpass.getuser()}"]
    finally:
        store.close()


def wait_for_prompt(proc: subprocess.Popen[bytes], marker: bytes, timeout: float = 30) -> bytes:
    """Read the child's stderr until the confirmation question shows up."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + timeout
    fd = proc.stderr.fileno()
    while marker not in seen:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"no prompt; stderr so far: {seen.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            seen += os.read(fd, 4096)
    return seen


def test_interactive_chat_is_one_conversation_across_messages(
    tmp_path: Path, skills_root: Path, fake: FakeLLM
) -> None:
    fake.add(Reply("Hello! What do you need?"), Reply("db-01 it is."))
    done = subprocess.run(
        [CLI, "-q", "chat", "--json"],
        input="hi\n\nlook at db-01\n/quit\n",
        capture_output=True,
        text=True,
        env=environ(tmp_path, skills_root, fake),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Hello! What do you need?" in done.stdout
    second = fake.request(1)["messages"]
    assert [(m["role"], m["content"]) for m in second[1:]] == [
        ("user", "hi"),
        ("assistant", "Hello! What do you need?"),
        ("user", "look at db-01"),
    ]
    body = json.loads(done.stdout.splitlines()[-1])
    assert body["final_answer"] == "db-01 it is."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]


def test_ctrl_c_while_a_run_waits_interrupts_it_and_withdraws_its_request(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    make_skill("set_flag", ECHO, **{"class": "mutating"})
    write_persona(tmp_path / "personas", "fixer", "mutating-with-confirm")
    fake.add(Reply(calls=[call("set_flag", {"flag": "on"})]))
    proc = subprocess.Popen(
        [CLI, "-q", "chat", "--persona", "fixer", "-m", "turn it on"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ(tmp_path, skills_root, fake),
    )
    try:
        wait_for_prompt(proc, b"waits for approval")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    store = open_store(str(tmp_path / "data"))
    try:
        (run,) = RunStore(store).page()
        assert run.status == "interrupted"
        assert [a.status for a in store.approvals.with_status("cancelled")] == ["cancelled"]
        assert store.approvals.with_status("pending") == []
    finally:
        store.close()


def test_chat_beside_a_server_that_owns_the_data_dir_prints_no_warning(
    tmp_path: Path, skills_root: Path, make_skill: MakeSkill, fake: FakeLLM
) -> None:
    """`serve` holds the data dir (its lock); a `chat` next to it is the normal case, not a
    problem the user must read about."""
    make_skill("disk_usage", NOISY)
    fake.add(Reply("fine."))
    env = environ(tmp_path, skills_root, fake)
    open_store(env["ONGRID_DATA_DIR"], None).close()
    server_lock = DataDirLock(Settings(data_dir=env["ONGRID_DATA_DIR"]))
    assert server_lock.acquire()
    try:
        done = subprocess.run(
            [CLI, "chat", "-m", "how is it?"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        server_lock.release()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fine.\n"
    assert "WARNING" not in done.stderr and "another manager" not in done.stderr, done.stderr
