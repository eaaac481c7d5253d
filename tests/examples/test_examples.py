"""The bundled example skills of examples/skills, run for real.

Each skill is exercised twice over: its executable run directly with the wire protocol (args on
stdin, an environment holding only PATH, as the runner gives it), and through the product CLI
(`ongrid-skills run NAME ARGS --yes --i-know-it-is-dangerous`, with ONGRID_SKILLS_EXTERNAL_DIRS
pointing at examples/skills). Real processes, real files, a real TCP listener; no mocks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS
from tests.support.sockets import fill_backlog, free_port

DANGER_FLAGS = ("--yes", "--i-know-it-is-dangerous")
DAY = 86400

EXPECTED = {
    # folder: (name, class, category)
    "disk-cleaner": ("disk_cleaner", "mutating", "ops"),
    "host-info": ("host_info", "safe", "diagnostics"),
    "port-check": ("port_check", "safe", "network"),
    "process-signal": ("process_signal", "dangerous", "ops"),
    "log-grep": ("log_grep", "safe", "diagnostics"),
}


# --- helpers -------------------------------------------------------------------------------


def manifest(folder: str) -> dict[str, Any]:
    return json.loads((EXAMPLE_SKILLS / folder / "skill.json").read_text(encoding="utf-8"))


def run_entry(folder: str, args: Any, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run a skill's executable directly, the way the runner does (env = only PATH)."""
    entry = EXAMPLE_SKILLS / folder / manifest(folder)["entry"]
    stdin = args if isinstance(args, str) else json.dumps(args)
    return subprocess.run(
        [str(entry)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=entry.parent,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        timeout=timeout,
    )


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONGRID_")}
    env["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(EXAMPLE_SKILLS)
    env["ONGRID_DATA_DIR"] = str(tmp_path / "ongrid-data")
    return env


@pytest.fixture
def cli(cli_env: dict[str, str], tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """cli(name, args, *flags): run `ongrid-skills run` and return the CompletedProcess."""

    def run(
        name: str, args: Any, *flags: str, confirm: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(CLI), "run", name, args if isinstance(args, str) else json.dumps(args)]
        if confirm:
            cmd += DANGER_FLAGS
        cmd += flags
        return subprocess.run(
            cmd, capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=120
        )

    return run


def result_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


def execution_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The Execution object printed by `run --json`."""
    try:
        return json.loads(proc.stdout)
    except ValueError:
        pytest.fail(
            f"--json printed no JSON (exit {proc.returncode}): {proc.stdout!r}\n{proc.stderr}"
        )


def age(path: Path, days: float) -> Path:
    when = time.time() - days * DAY
    os.utime(path, (when, when), follow_symlinks=False)
    return path


def make_file(path: Path, size: int, days_old: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return age(path, days_old)


def progress_lines(stderr: str) -> list[dict[str, Any]]:
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if "progress" in event:
                found.append(event)
    return found


# --- manifests -----------------------------------------------------------------------------


def test_examples_are_exactly_the_five_bundled_skills() -> None:
    folders = sorted(p.parent.name for p in EXAMPLE_SKILLS.glob("*/skill.json"))
    assert folders == sorted(EXPECTED)
    for folder, (name, klass, category) in EXPECTED.items():
        m = manifest(folder)
        assert (m["name"], m["class"], m["category"]) == (name, klass, category)


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_every_manifest_is_complete_and_its_entry_is_a_self_contained_executable(
    folder: str,
) -> None:
    m = manifest(folder)
    assert re.fullmatch(r"[a-z0-9_]{1,64}", m["name"])
    assert m["description"].strip() and len(m["description"]) >= 60
    assert m["class"] in {"safe", "mutating", "dangerous"}
    assert isinstance(m["category"], str) and m["category"]
    assert isinstance(m["timeout_seconds"], int) and 0 < m["timeout_seconds"] <= 86400
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) for v in m["env_allow"])
    assert set(m) <= {
        "name",
        "description",
        "schema",
        "entry",
        "env_allow",
        "timeout_seconds",
        "class",
        "category",
        "preview",
    }

    schema = m["schema"]
    assert schema["type"] == "object"
    assert schema.get("additionalProperties") is False
    jsonschema_rs.meta.validate(schema)  # a valid Draft 2020-12 schema
    for prop in schema["properties"].values():
        assert prop.get("description") or prop.get("enum"), prop

    entry = EXAMPLE_SKILLS / folder / m["entry"]
    assert not os.path.isabs(m["entry"])
    assert entry.is_file() and not entry.is_symlink()
    assert os.access(entry, os.X_OK)
    shebang = entry.read_text(encoding="utf-8").splitlines()[0]
    assert shebang in {"#!/bin/sh", "#!/usr/bin/env python3"}
    if "python3" in shebang:
        assert "PATH" in m["env_allow"]  # /usr/bin/env needs PATH to find python3


def test_disk_cleaner_manifest_is_the_one_of_the_users_document() -> None:
    m = manifest("disk-cleaner")
    assert m["description"].startswith("Free up disk by clearing stale build caches and journals.")
    assert m["entry"] == "run.sh"
    assert m["env_allow"] == ["PATH", "HOME"]
    assert m["timeout_seconds"] == 60
    props = m["schema"]["properties"]
    assert m["schema"]["required"] == ["path"]
    assert props["path"]["type"] == "string"
    assert props["dry_run"] == {**props["dry_run"], "type": "boolean", "default": True}
    assert props["older_than_days"]["type"] == "integer"
    assert props["older_than_days"]["default"] == 7
    assert props["older_than_days"]["minimum"] == 0


def test_shell_skills_share_one_json_args_decoder() -> None:
    copies = {p.read_bytes() for p in EXAMPLE_SKILLS.glob("*/json_args.awk")}
    assert len(list(EXAMPLE_SKILLS.glob("*/json_args.awk"))) == 2
    assert len(copies) == 1


def test_cli_lists_every_example_with_its_class_and_category(cli_env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(CLI), "list", "--json", "-v"], capture_output=True, text=True, env=cli_env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    items = {item["name"]: item for item in json.loads(proc.stdout)["items"]}
    for folder, (name, klass, category) in EXPECTED.items():
        assert items[name]["class"] == klass
        assert items[name]["category"] == category
        assert items[name]["kind"] == "subprocess"
        line = f'skill loader: registered subprocess skill "{name}" from '
        assert line + str(EXAMPLE_SKILLS / folder / "skill.json") in proc.stderr


def test_cli_validate_finds_nothing_to_report_in_the_examples(cli_env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(CLI), "validate", str(EXAMPLE_SKILLS)],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "error:" not in proc.stdout + proc.stderr
    assert "warning:" not in proc.stdout + proc.stderr


# --- disk_cleaner --------------------------------------------------------------------------


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A cache with stale and fresh files; the stale ones hold 100 + 250 + 4000 bytes."""
    root = tmp_path / "cache"
    make_file(root / "old.log", 100, days_old=10)
    make_file(root / "build" / "objs" / "stale.o", 250, days_old=30)
    make_file(root / "build" / "ancient.tar", 4000, days_old=400)
    make_file(root / "fresh.log", 7000, days_old=1)
    make_file(root / "build" / "today.o", 9000, days_old=0.01)
    return root


def test_disk_cleaner_dry_run_reports_but_keeps_stale_files(cli, cache_dir: Path) -> None:
    before = sorted(p for p in cache_dir.rglob("*"))
    result = result_of(cli("disk_cleaner", {"path": str(cache_dir)}))
    assert result["dry_run"] is True
    assert result["freed_bytes"] == 100 + 250 + 4000
    assert result["files_deleted"] == 3
    assert sorted(p for p in cache_dir.rglob("*")) == before


def test_disk_cleaner_previews_its_requests_by_a_dry_run_naming_the_files_it_would_delete(
    cli, cache_dir: Path
) -> None:
    assert manifest("disk-cleaner")["preview"] == {"args": {"dry_run": True}, "timeout_seconds": 30}
    before = sorted(p for p in cache_dir.rglob("*"))
    result = result_of(cli("disk_cleaner", {"path": str(cache_dir)}))
    stale = ["old.log", "build/objs/stale.o", "build/ancient.tar"]
    assert sorted(result["would_delete"]) == sorted(str(cache_dir / name) for name in stale)
    assert sorted(p for p in cache_dir.rglob("*")) == before


def test_disk_cleaner_names_hostile_files_it_would_delete_as_plain_json(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    for name in ('quo"te\\back', "new\nline", "émoji"):
        make_file(root / name, 3, days_old=30)
    proc = run_entry("disk-cleaner", {"path": str(root)})
    assert proc.returncode == 0, proc.stderr
    named = sorted(json.loads(proc.stdout)["would_delete"])
    assert named == sorted(
        str(root / n)
        for n in ('quo"te\\back', "new?line", "??moji")  # é is two bytes
    )


def test_disk_cleaner_deletes_only_stale_regular_files(cli, cache_dir: Path) -> None:
    proc = cli("disk_cleaner", {"path": str(cache_dir), "dry_run": False})
    result = result_of(proc)
    assert result == {
        "freed_bytes": 4350,
        "files_deleted": 3,
        "dry_run": False,
        "older_than_days": 7,
        "errors": 0,
    }
    assert not (cache_dir / "old.log").exists()
    assert not (cache_dir / "build" / "objs" / "stale.o").exists()
    assert not (cache_dir / "build" / "ancient.tar").exists()
    assert (cache_dir / "fresh.log").read_bytes() == b"x" * 7000
    assert (cache_dir / "build" / "today.o").exists()
    assert (cache_dir / "build" / "objs").is_dir()  # directories are kept


def test_disk_cleaner_older_than_days_moves_the_cutoff(cli, cache_dir: Path) -> None:
    args = {"path": str(cache_dir), "dry_run": False, "older_than_days": 100}
    result = result_of(cli("disk_cleaner", args))
    assert (result["files_deleted"], result["freed_bytes"]) == (1, 4000)
    assert not (cache_dir / "build" / "ancient.tar").exists()
    assert (cache_dir / "old.log").exists()

    args["older_than_days"] = 0
    result = result_of(cli("disk_cleaner", args))
    assert result["files_deleted"] == 4  # every remaining file, fresh ones included
    assert not [p for p in cache_dir.rglob("*") if p.is_file()]


def test_disk_cleaner_never_follows_symlinks(cli, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    outside = tmp_path / "precious"
    target_file = make_file(outside / "keep.db", 500, days_old=90)
    make_file(outside / "sub" / "keep2.db", 500, days_old=90)
    root.mkdir()
    (root / "link-to-file").symlink_to(target_file)
    (root / "link-to-dir").symlink_to(outside / "sub", target_is_directory=True)
    for link in root.iterdir():
        age(link, 90)
    make_file(root / "stale.tmp", 10, days_old=90)

    result = result_of(cli("disk_cleaner", {"path": str(root), "dry_run": False}))
    assert (result["files_deleted"], result["freed_bytes"]) == (1, 10)
    assert target_file.read_bytes() == b"x" * 500
    assert (outside / "sub" / "keep2.db").exists()
    assert (root / "link-to-file").is_symlink()
    assert (root / "link-to-dir").is_symlink()

    # A symlink given as the root itself is refused, not followed.
    proc = cli("disk_cleaner", {"path": str(root / "link-to-dir"), "dry_run": False}, "--json")
    assert proc.returncode == 1
    execution = execution_of(proc)
    assert execution["status"] == "failed"
    assert "symbolic link" in execution["stderr_tail"]
    assert (outside / "sub" / "keep2.db").exists()


def test_disk_cleaner_copes_with_hostile_file_names(cli, tmp_path: Path) -> None:
    root = tmp_path / 'caché dir "quoted" \\ back'
    names = [
        "sp ace.log",
        "new\nline.log",
        "F 999999\nF 888888",  # looks like a size line of the pipeline inside run.sh
        "-rf",
        "quote'\"$(touch pwned)`id`.log",
        "émoji-😀.log",
        "tab\there",
    ]
    for name in names:
        make_file(root / name, 3, days_old=30)
    make_file(root / "nested\ndir" / "x.log", 3, days_old=30)

    result = result_of(cli("disk_cleaner", {"path": str(root), "dry_run": False}))
    assert result["files_deleted"] == len(names) + 1
    assert result["freed_bytes"] == 3 * (len(names) + 1)
    assert [p for p in root.rglob("*") if p.is_file()] == []
    assert not (root / "pwned").exists() and not Path("pwned").exists()


def test_disk_cleaner_without_yes_is_denied_and_deletes_nothing(cli, cache_dir: Path) -> None:
    before = sorted(p for p in cache_dir.rglob("*"))
    proc = cli("disk_cleaner", {"path": str(cache_dir), "dry_run": False}, confirm=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert sorted(p for p in cache_dir.rglob("*")) == before


def test_disk_cleaner_missing_path_is_invalid_args(cli) -> None:
    proc = cli("disk_cleaner", {"dry_run": True})
    assert proc.returncode == 2, proc.stdout + proc.stderr

    # --json: an Execution with status invalid_args, or the bare error envelope (as REST's 400)
    proc = cli("disk_cleaner", {"dry_run": True}, "--json")
    assert proc.returncode == 2
    payload = execution_of(proc)
    assert payload.get("status", "invalid_args") == "invalid_args"
    assert payload["error"]["code"] == "invalid_args"
    assert '"path"' in payload["error"]["message"] + json.dumps(payload["error"].get("details"))


@pytest.mark.parametrize(
    "args",
    [
        {"path": "relative/dir"},
        {"path": "/tmp", "dry_run": "no"},
        {"path": "/tmp", "older_than_days": -1},
        {"path": "/tmp", "older_than_days": 1.5},
        {"path": "/tmp", "unknown": 1},
    ],
)
def test_disk_cleaner_bad_args_are_refused_before_anything_runs(cli, args: dict) -> None:
    proc = cli("disk_cleaner", args)
    assert proc.returncode == 2, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/", 'refusing to clean "/"'),
        ("//", 'refusing to clean "/"'),
        ("/etc", "system directory"),
        ("/usr/lib", "system directory"),
        ("/var", "too broad"),
        ("/no/such/dir/anywhere", "no such file or directory"),
    ],
)
def test_disk_cleaner_refuses_root_system_and_missing_paths(cli, path: str, message: str) -> None:
    proc = cli("disk_cleaner", {"path": path, "dry_run": False}, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    execution = execution_of(proc)
    assert execution["status"] == "failed"
    assert execution["error"]["code"] == "exit_status"
    assert execution["exit_code"] != 0
    assert message in execution["stderr_tail"]


def test_disk_cleaner_refuses_a_file_as_path(cli, tmp_path: Path) -> None:
    victim = make_file(tmp_path / "file.log", 5, days_old=30)
    proc = cli("disk_cleaner", {"path": str(victim), "dry_run": False}, "--json")
    assert proc.returncode == 1
    assert "not a directory" in execution_of(proc)["stderr_tail"]
    assert victim.exists()


def test_disk_cleaner_run_directly_refuses_bad_input_without_json(tmp_path: Path) -> None:
    for args in ('{"path": "relative"}', '{"path": "/"}', "{}", "[]", "not json", '{"path": 1}'):
        proc = run_entry("disk-cleaner", args)
        assert proc.returncode != 0, args
        assert proc.stdout == "", args
        assert proc.stderr.strip(), args


def test_disk_cleaner_streams_progress_on_stderr(tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for i in range(2100):
        make_file(root / f"f{i:05d}", 1, days_old=10)
    proc = run_entry("disk-cleaner", {"path": str(root)})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["files_deleted"] == 2100
    counts = [event["progress"] for event in progress_lines(proc.stderr)]
    assert counts == [1000, 2000, 2100]
    assert "disk_cleaner: scanning" in proc.stderr
    assert len(list(root.iterdir())) == 2100  # dry run by default


# --- host_info -----------------------------------------------------------------------------


def meminfo_bytes(field: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(field)


@pytest.mark.skipif(not Path("/proc/meminfo").exists(), reason="needs Linux /proc")
def test_host_info_reports_identity_uptime_load_memory_and_cpus(cli) -> None:
    info = result_of(cli("host_info", {}))
    assert info["hostname"] == socket.gethostname()
    assert info["kernel"] == os.uname().release
    assert info["arch"] == os.uname().machine
    assert info["cpu_count"] == os.cpu_count()
    assert 1 <= info["cpu_usable"] <= info["cpu_count"]
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    assert abs(info["uptime_seconds"] - uptime) < 60
    assert set(info["load_average"]) == {"1m", "5m", "15m"}
    assert all(v >= 0 for v in info["load_average"].values())
    assert info["memory"]["total_bytes"] == meminfo_bytes("MemTotal")
    assert 0 < info["memory"]["available_bytes"] <= info["memory"]["total_bytes"]
    assert 0 <= info["memory"]["used_percent"] <= 100


def test_host_info_takes_no_arguments(cli) -> None:
    assert cli("host_info", {"verbose": True}).returncode == 2
    direct = run_entry("host-info", {"verbose": True})
    assert direct.returncode == 2 and direct.stdout == ""
    assert '"verbose"' in direct.stderr


def test_cli_json_prints_the_whole_execution(cli) -> None:
    proc = cli("host_info", {}, "--json")
    assert proc.returncode == 0, proc.stderr
    execution = execution_of(proc)
    assert execution["skill"] == "host_info"
    assert execution["status"] == "succeeded"
    assert execution["args"] == {}
    assert execution["error"] is None
    assert execution["exit_code"] == 0
    assert execution["id"]
    assert execution["result"]["hostname"] == socket.gethostname()


# --- port_check ----------------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


def test_port_check_reports_an_open_port_on_a_loopback_listener(
    cli, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    result = result_of(cli("port_check", {"host": "127.0.0.1", "port": port}))
    assert result["open"] is True
    assert (result["host"], result["port"], result["reason"]) == ("127.0.0.1", port, "connected")
    assert 0 <= result["elapsed_ms"] < 2000
    conn, _ = listener.accept()  # it really connected
    conn.close()


def test_port_check_resolves_host_names(cli, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    result = result_of(cli("port_check", {"host": "localhost", "port": port, "timeout_ms": 3000}))
    assert result["open"] is True


def test_port_check_reports_a_closed_port_as_refused(cli) -> None:
    port = free_port()
    result = result_of(cli("port_check", {"host": "127.0.0.1", "port": port}))
    assert result["open"] is False
    assert result["reason"] == "refused"
    assert result["port"] == port


def test_port_check_gives_up_after_timeout_ms_when_nobody_answers(tmp_path: Path) -> None:
    # A listener whose accept queue is full: the kernel drops further SYNs, so a new connect
    # hangs exactly like a firewalled port.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = fill_backlog(server)
    try:
        start = time.monotonic()
        proc = run_entry("port-check", {"host": "127.0.0.1", "port": port, "timeout_ms": 400})
        took = time.monotonic() - start
    finally:
        for s in [*fillers, server]:
            s.close()
    result = json.loads(proc.stdout)
    assert proc.returncode == 0
    assert (result["open"], result["reason"]) == (False, "timeout")
    assert 350 <= result["elapsed_ms"] < 3000
    assert took < 5


@pytest.mark.parametrize(
    "args",
    [
        {"host": "127.0.0.1", "port": 0},
        {"host": "127.0.0.1", "port": 65536},
        {"host": "127.0.0.1", "port": "80"},
        {"host": "127.0.0.1"},
        {"port": 80},
        {"host": "-oProxyCommand=touch pwned", "port": 80},
        {"host": "a;touch pwned", "port": 80},
        {"host": "127.0.0.1", "port": 80, "timeout_ms": 0},
    ],
)
def test_port_check_refuses_bad_ports_and_hostile_hosts(cli, args: dict, tmp_path: Path) -> None:
    assert cli("port_check", args).returncode == 2
    direct = run_entry("port-check", args)
    assert direct.returncode == 2 and direct.stdout == ""
    assert not (tmp_path / "pwned").exists()


# --- process_signal ------------------------------------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_process_signals_preview_says_who_would_get_which_signal_and_sends_nothing(
    sleeper,
) -> None:
    assert manifest("process-signal")["preview"] == {"entry": "plan.py", "timeout_seconds": 5}
    plan = EXAMPLE_SKILLS / "process-signal" / "plan.py"
    proc = subprocess.run(
        [str(plan)],
        input=json.dumps({"pid": sleeper.pid, "signal": "KILL"}),
        capture_output=True,
        text=True,
        cwd=plan.parent,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    said = json.loads(proc.stdout)
    assert said == {
        "would_send": "SIGKILL",
        "pid": sleeper.pid,
        "exists": True,
        "name": "sleep",
        "cmdline": "sleep 300",
        "user": os.getuid(),
    }
    assert sleeper.poll() is None  # nothing was sent
    assert not (plan.parent / "__pycache__").exists()  # the folder stays as shipped


@pytest.mark.parametrize("name", ["TERM", "KILL", "HUP", "INT"])
def test_process_signal_delivers_the_signal_to_a_child_sleep(cli, sleeper, name: str) -> None:
    result = result_of(cli("process_signal", {"pid": sleeper.pid, "signal": name}))
    assert result == {"pid": sleeper.pid, "signal": name, "sent": True, "name": "sleep"}
    assert sleeper.wait(timeout=10) == -getattr(signal, "SIG" + name)


def test_process_signal_defaults_to_term(cli, sleeper) -> None:
    result = result_of(cli("process_signal", {"pid": sleeper.pid}))
    assert result["signal"] == "TERM"
    assert sleeper.wait(timeout=10) == -signal.SIGTERM


def test_process_signal_is_not_run_without_the_dangerous_acknowledgement(
    sleeper: subprocess.Popen[bytes], cli_env: dict[str, str], tmp_path: Path
) -> None:
    for flags in ((), ("--yes",)):
        proc = subprocess.run(
            [str(CLI), "run", "process_signal", json.dumps({"pid": sleeper.pid}), *flags],
            capture_output=True,
            text=True,
            env=cli_env,
            cwd=tmp_path,
            timeout=60,
        )
        assert proc.returncode in (3, 4), proc.stdout + proc.stderr  # denied or pending
    with pytest.raises(subprocess.TimeoutExpired):  # no signal reaches it in the next 200 ms
        sleeper.wait(timeout=0.2)
    assert sleeper.poll() is None  # still alive


@pytest.mark.parametrize("pid", [1, 0, -1])
def test_process_signal_refuses_init_and_process_groups(cli, pid: int) -> None:
    assert cli("process_signal", {"pid": pid}).returncode == 2
    direct = run_entry("process-signal", {"pid": pid})
    assert direct.returncode == 2 and direct.stdout == ""
    assert "must be greater than 1" in direct.stderr


def test_process_signal_refuses_its_parent_and_ancestors(cli) -> None:
    # Run directly, the parent is this test process; under the CLI it is an ancestor.
    direct = run_entry("process-signal", {"pid": os.getpid(), "signal": "KILL"})
    assert direct.returncode == 1 and direct.stdout == ""
    assert "ancestor" in direct.stderr

    proc = cli("process_signal", {"pid": os.getpid(), "signal": "TERM"}, "--json")
    assert proc.returncode == 1
    execution = execution_of(proc)
    assert execution["status"] == "failed"
    assert "ancestor" in execution["stderr_tail"]


def test_process_signal_reports_a_missing_process(cli) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # reaped: its pid is free
    proc = cli("process_signal", {"pid": gone.pid}, "--json")
    assert proc.returncode == 1
    execution = execution_of(proc)
    assert execution["error"]["code"] == "exit_status"
    assert execution["exit_code"] == 1
    assert f"no such process: {gone.pid}" in execution["stderr_tail"]


# --- log_grep ------------------------------------------------------------------------------


@pytest.fixture
def app_log(tmp_path: Path) -> Path:
    path = tmp_path / "app.log"
    lines = []
    for i in range(1, 1001):
        if i % 100 == 0:
            lines.append(f"2024-05-01T10:00:{i % 60:02d} ERROR request {i} failed: timeout")
        else:
            lines.append(f"2024-05-01T10:00:{i % 60:02d} INFO request {i} ok")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_log_grep_returns_matching_lines_with_line_numbers(cli, app_log: Path) -> None:
    result = result_of(cli("log_grep", {"path": str(app_log), "pattern": r"ERROR .* (\d+) failed"}))
    assert [m["line"] for m in result["matches"]] == list(range(100, 1001, 100))
    assert result["matches"][0]["text"].endswith("ERROR request 100 failed: timeout")
    assert result["match_count"] == 10
    assert result["truncated"] is False
    assert result["lines_scanned"] == 1000
    assert result["file_size"] == app_log.stat().st_size


def test_log_grep_ignore_case(cli, app_log: Path) -> None:
    args = {"path": str(app_log), "pattern": "error request", "ignore_case": True}
    assert result_of(cli("log_grep", args))["match_count"] == 10
    args["ignore_case"] = False
    assert result_of(cli("log_grep", args))["match_count"] == 0


def test_log_grep_stops_at_max_matches_and_says_truncated(cli, app_log: Path) -> None:
    result = result_of(cli("log_grep", {"path": str(app_log), "pattern": "INFO", "max_matches": 5}))
    assert [m["line"] for m in result["matches"]] == [1, 2, 3, 4, 5]
    assert result["truncated"] is True
    assert result["lines_scanned"] < 1000


def test_log_grep_default_max_matches_is_100(cli, app_log: Path) -> None:
    result = result_of(cli("log_grep", {"path": str(app_log), "pattern": "request"}))
    assert result["match_count"] == 100 and result["truncated"] is True


def test_log_grep_max_matches_above_1000_is_invalid_args(cli, app_log: Path) -> None:
    args = {"path": str(app_log), "pattern": "x", "max_matches": 1001}
    assert cli("log_grep", args).returncode == 2


def test_log_grep_invalid_regex_fails_with_a_clear_message(cli, app_log: Path) -> None:
    proc = cli("log_grep", {"path": str(app_log), "pattern": "(unclosed"}, "--json")
    assert proc.returncode == 1
    assert "invalid regular expression" in execution_of(proc)["stderr_tail"]


def test_log_grep_refuses_files_over_one_gib(cli, tmp_path: Path) -> None:
    huge = tmp_path / "huge.log"
    with huge.open("wb") as f:
        f.truncate((1 << 30) + 1)  # sparse: costs no disk
    proc = cli("log_grep", {"path": str(huge), "pattern": "x"}, "--json")
    assert proc.returncode == 1
    assert "larger than the 1 GiB limit" in execution_of(proc)["stderr_tail"]


def test_log_grep_refuses_directories_fifos_and_missing_files(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, message in [
        (tmp_path, "a directory"),
        (fifo, "not a regular file"),  # opening must not block on a FIFO
        (tmp_path / "missing.log", "no such file"),
    ]:
        proc = run_entry("log-grep", {"path": str(path), "pattern": "x"}, timeout=10)
        assert proc.returncode == 1 and proc.stdout == ""
        assert message in proc.stderr


def test_log_grep_streams_progress_every_100k_lines(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    with path.open("w") as f:
        for i in range(250_000):
            f.write(f"line {i} {'WARN' if i % 60_000 == 0 else 'ok'}\n")
    proc = run_entry("log-grep", {"path": str(path), "pattern": "WARN"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["match_count"] == 5
    events = progress_lines(proc.stderr)
    assert len(events) == 2
    assert all(e["total"] == path.stat().st_size for e in events)
    assert events[0]["progress"] < events[1]["progress"] < path.stat().st_size
    assert "100000 lines" in events[0]["message"]
