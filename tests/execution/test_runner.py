"""The subprocess runner against real, hostile children (SPEC §4, wire protocol).

Every test spawns real processes: sh scripts, Python scripts and small C programs written into
tmp_path. Waits poll a condition against a monotonic deadline; nothing sleeps for a fixed time.
Timeouts, the kill grace and the linger are shortened per runner where the behaviour allows; the
default 1 s linger and 2 s kill grace are each exercised once.

Every test runs twice: with the spawn helper (C, ``posix_spawn``) and with the pure-Python
fallback (``subprocess``), which ``ONGRID_SPAWN_HELPER=off`` forces.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

import ongrid_skills
from ongrid_skills.execution import child_call as call_module
from ongrid_skills.execution.records import Event, Status
from ongrid_skills.execution.runner import RunOutcome, SpawnSpec, SubprocessRunner
from ongrid_skills.execution.spawner import ENV_SWITCH, Child, HelperSpawner
from ongrid_skills.execution.stderr import LINE_CAP, STDERR_BUDGET, TAIL_BYTES
from ongrid_skills.execution.wire import STDOUT_CAP
from tests.support.processes import open_fds, open_fds_settled, pid_gone, proc_stat, zombie_children
from tests.support.runner import (
    Call,
    assert_gone,
    canonical_dir,
    compile_c,
    install_binary,
    make_unreadable_by_exec,
    python_skill,
    read_int_file,
    require_helper,
    run_call,
    script_skill,
    write_executable,
)
from tests.support.waiting import until, wait_for

# --------------------------------------------------------------------------------------------
# C programs, compiled once per module
# --------------------------------------------------------------------------------------------

PROBE_C = r"""
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
extern char **environ;

static void dump(const char *path, char **list) {
    FILE *f = fopen(path, "wb");
    for (; *list; list++) { fputs(*list, f); fputc(0, f); }
    fclose(f);
}

int main(int argc, char **argv) {
    (void)argc;
    /* Relative paths: the files land in the cwd, which must be the skill's folder. */
    FILE *f = fopen("stdin.bin", "wb");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) fwrite(buf, 1, n, f);
    fclose(f);
    dump("argv.bin", argv);
    dump("environ.bin", environ);
    DIR *d = opendir("/proc/self/fd");
    f = fopen("fds.txt", "w");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d) || atoi(e->d_name) == fileno(f))
            continue;
        fprintf(f, "%s\n", e->d_name);
    }
    fclose(f);
    closedir(d);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return 9;
    f = fopen("ids.txt", "w");
    fprintf(f, "%d %d %d %d\n%s", getpid(), getsid(0), getpgid(0), getppid(), cwd);
    fclose(f);
    fputs("probe done\n", stderr);
    fputs("  \n {\"b\": 1,   \"a\": 2}\n\t \n", stdout);
    return 0;
}
"""

TERM_LOGGER_C = r"""
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; write(2, "got SIGTERM\n", 12); }

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    fputs("ready\n", stderr);
    fflush(stderr);
    for (;;) pause();
}
"""

SIGNALS_C = r"""
#include <stdio.h>
#include <string.h>
/* Prints the SigBlk and SigIgn masks of /proc/self/status as a JSON object. */
int main(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256], blk[64] = "", ign[64] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "SigBlk:", 7)) sscanf(line + 7, "%63s", blk);
        if (!strncmp(line, "SigIgn:", 7)) sscanf(line + 7, "%63s", ign);
    }
    printf("{\"blocked\": \"%s\", \"ignored\": \"%s\"}\n", blk, ign);
    return 0;
}
"""

TRIVIAL_C = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) {
    char buf[4096];
    while (read(0, buf, sizeof buf) > 0) {}
    fputs("{\"ok\":true}\n", stdout);
    return 0;
}
"""


@pytest.fixture(autouse=True, params=["helper", "subprocess"])
def spawn_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which spawner the runners of this test use (``auto`` resolves to it)."""
    path = str(request.param)
    if path == "subprocess":
        monkeypatch.setenv(ENV_SWITCH, "off")
    else:
        monkeypatch.delenv(ENV_SWITCH, raising=False)
        require_helper()
    return path


@pytest.fixture(scope="module")
def binaries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("bin")
    return {
        "probe": compile_c(PROBE_C, out / "probe"),
        "term_logger": compile_c(TERM_LOGGER_C, out / "term_logger"),
        "trivial": compile_c(TRIVIAL_C, out / "trivial"),
        "signals": compile_c(SIGNALS_C, out / "signals"),
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A canonical allow-list root."""
    return canonical_dir(tmp_path / "root")


@pytest.fixture
def fast() -> SubprocessRunner:
    """A runner with a short kill grace and linger, for tests where their length is moot."""
    return SubprocessRunner(kill_grace=0.2, linger=0.2)


def error_message(call: Call) -> str:
    assert call.outcome.error is not None
    return call.outcome.error.message


def assert_failure_shape(call: Call, status: Status, code: str) -> None:
    """SPEC §4: a failure carries error.code, error.message, exit_code (or null), stderr_tail."""
    out = call.outcome
    assert out.status is status, (out.status, out.error)
    assert out.error is not None
    assert out.error.code == code, out.error
    assert out.error.message
    assert out.result is None
    assert out.result_text is None
    assert isinstance(out.stderr_tail, str)


# --------------------------------------------------------------------------------------------
# Success: what the child receives, what the caller gets back
# --------------------------------------------------------------------------------------------


def test_a_successful_call_hands_back_the_exact_stdout_bytes_trimmed_not_reserialised(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    spec = install_binary(root, binaries["probe"])
    call = run_call(fast, spec, b'{"x": 1}')
    out = call.outcome
    assert out.status is Status.SUCCEEDED, out.error
    assert out.error is None
    assert out.result_text == '{"b": 1,   "a": 2}'
    assert out.result == {"b": 1, "a": 2}
    assert list(out.result) == ["b", "a"]
    assert out.exit_code == 0
    assert out.signal is None
    assert out.stderr_tail == "probe done\n"
    assert out.duration_ms > 0
    assert out.started_at is not None


def test_stdin_receives_exactly_the_payload_and_is_then_closed(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    spec = install_binary(root, binaries["probe"])
    payload = json.dumps({"path": "/var/cache", "note": "ñandú ☃", "n": [1, 2]}).encode()
    call = run_call(fast, spec, payload)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    # The probe reads stdin to EOF before writing anything: EOF proves stdin was closed.
    assert (root / "skill" / "stdin.bin").read_bytes() == payload


def test_the_entry_is_spawned_directly_with_argv_entry_in_the_skill_folder(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    spec = install_binary(root, binaries["probe"])
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    folder = root / "skill"
    assert (folder / "argv.bin").read_bytes() == spec.entry.encode() + b"\0"
    ids, cwd = (folder / "ids.txt").read_text().split("\n", 1)
    assert cwd == str(folder)
    pid, _sid, _pgid, ppid = map(int, ids.split())
    assert ppid == os.getpid()  # no shell in between
    # Only stdin, stdout and stderr are open in the child: nothing else leaked in.
    assert sorted((folder / "fds.txt").read_text().split()) == ["0", "1", "2"]
    assert pid > 0


def test_a_descriptor_the_manager_left_inheritable_does_not_reach_the_child(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    try:
        spec = install_binary(root, binaries["probe"])
        call = run_call(fast, spec)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert sorted((root / "skill" / "fds.txt").read_text().split()) == ["0", "1", "2"]


def test_the_child_starts_with_no_blocked_signal_and_sigpipe_at_its_default(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    # Python ignores SIGPIPE (and SIGXFSZ); a skill must not inherit that: `cmd | head` in a
    # shell skill relies on SIGPIPE killing `cmd`.
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    spec = install_binary(root, binaries["signals"])
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    masks = call.outcome.result
    assert int(masks["blocked"], 16) == 0
    ignored = int(masks["ignored"], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1))
    assert not ignored & (1 << (signal.SIGXFSZ - 1))


def test_the_child_environment_is_exactly_the_spawn_spec_env_and_nothing_inherited(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_RUNNER_TEST_MARKER", "leaked")
    spec = install_binary(root, binaries["probe"], env={"ONLY_THIS": "a b=c", "HOME": "/nowhere"})
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    raw = (root / "skill" / "environ.bin").read_bytes()
    assert sorted(raw.split(b"\0")[:-1]) == [b"HOME=/nowhere", b"ONLY_THIS=a b=c"]
    assert b"ONGRID_RUNNER_TEST_MARKER" not in raw
    assert b"PATH=" not in raw


def test_an_empty_env_gives_the_child_no_environment_at_all_not_even_path(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_RUNNER_TEST_MARKER", "leaked")
    assert "PATH" in os.environ
    spec = install_binary(root, binaries["probe"], env={})
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert (root / "skill" / "environ.bin").read_bytes() == b""


def test_the_child_leads_a_new_session_and_process_group(
    root: Path, fast: SubprocessRunner, binaries: dict[str, Path]
) -> None:
    spec = install_binary(root, binaries["probe"])
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    pid, sid, pgid, _ppid = map(
        int, (root / "skill" / "ids.txt").read_text().split("\n")[0].split()
    )
    assert sid == pid
    assert pgid == pid
    assert sid != os.getsid(0)
    assert pgid != os.getpgid(0)


# --------------------------------------------------------------------------------------------
# stdout: empty, garbage, not UTF-8, endless
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", "   \n\t\n"], ids=["nothing", "whitespace"])
def test_a_skill_that_prints_nothing_fails_as_empty_output(
    root: Path, fast: SubprocessRunner, body: str
) -> None:
    spec = script_skill(root, f"#!/bin/sh\nprintf '{body}'\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "empty_output")
    assert call.outcome.exit_code == 0


@pytest.mark.parametrize(
    "garbage",
    ["hello world", '{"a": 1', '{"a": 1}\n{"b": 2}', "[1, 2,]", "NaNny"],
    ids=["text", "unterminated", "two-values", "trailing-comma", "bare-word"],
)
def test_a_skill_that_prints_garbage_fails_as_invalid_output(
    root: Path, fast: SubprocessRunner, garbage: str
) -> None:
    spec = python_skill(root, f"import sys\nsys.stdout.write({garbage!r})\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "invalid_output")
    assert call.outcome.stdout == garbage.encode()


def test_a_skill_that_prints_non_utf8_on_stdout_fails_as_invalid_output(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\nprintf '\"caf\\351\"'\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "invalid_output")
    assert "UTF-8" in error_message(call)


def test_any_json_value_is_a_valid_result_not_only_objects(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\necho '  [1, \"two\", null]  '\n")
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED
    assert call.outcome.result == [1, "two", None]
    assert call.outcome.result_text == '[1, "two", null]'


def test_a_skill_that_prints_forever_past_a_small_cap_is_output_too_large_and_its_group_dies(
    root: Path, binaries: dict[str, Path]
) -> None:
    runner = SubprocessRunner(stdout_cap=64 * 1024, kill_grace=0.2, linger=0.2)
    # The writer is a grandchild: killing only the main process would leave it running.
    spec = script_skill(root, "#!/bin/sh\ncat /dev/zero &\necho $! > writer.pid\nwait\n")
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.OUTPUT_TOO_LARGE, "output_too_large")
    assert len(call.outcome.stdout) <= 64 * 1024
    assert_gone(read_int_file(root / "skill" / "writer.pid"))


def test_a_skill_that_prints_forever_past_the_default_16_mib_cap_is_output_too_large(
    root: Path,
) -> None:
    runner = SubprocessRunner()
    assert runner.stdout_cap == STDOUT_CAP == 16 * 1024 * 1024
    spec = script_skill(root, "#!/bin/sh\necho $$ > main.pid\nexec cat /dev/zero\n")
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.OUTPUT_TOO_LARGE, "output_too_large")
    assert len(call.outcome.stdout) <= STDOUT_CAP
    assert call.outcome.signal == "SIGKILL"
    assert call.elapsed < 5
    assert_gone(read_int_file(root / "skill" / "main.pid"))


def test_stdout_of_exactly_the_cap_is_still_accepted(root: Path) -> None:
    cap = 100_000
    runner = SubprocessRunner(stdout_cap=cap, kill_grace=0.2, linger=0.2)
    spec = python_skill(root, f"import sys\nsys.stdout.write('\"' + 'x' * {cap - 2} + '\"')\n")
    call = run_call(runner, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert len(call.outcome.result) == cap - 2


# --------------------------------------------------------------------------------------------
# stdin: no deadlock
# --------------------------------------------------------------------------------------------


def test_a_skill_that_never_reads_stdin_still_gets_600kb_of_args_without_deadlock(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\necho '{\"ignored\": true}'\n", timeout=5)
    payload = json.dumps({"blob": "x" * 600_000}).encode()
    call = run_call(fast, spec, payload)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.outcome.result == {"ignored": True}
    assert call.elapsed < 4


def test_a_skill_that_writes_a_large_result_before_reading_large_args_does_not_deadlock(
    root: Path, fast: SubprocessRunner
) -> None:
    # The classic pipe deadlock: the child blocks writing stdout while we block writing stdin.
    code = (
        "import sys, hashlib\n"
        "sys.stdout.write('{\"pad\": \"' + 'y' * 1_000_000 + '\", ')\n"
        "sys.stdout.flush()\n"
        "data = sys.stdin.buffer.read()\n"
        'sys.stdout.write(\'"len": %d, "sha": "%s"}\' % '
        "(len(data), hashlib.sha256(data).hexdigest()))\n"
    )
    spec = python_skill(root, code, timeout=10)
    payload = json.dumps({"blob": "z" * 800_000}).encode()
    call = run_call(fast, spec, payload)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    import hashlib

    assert call.outcome.result["len"] == len(payload)
    assert call.outcome.result["sha"] == hashlib.sha256(payload).hexdigest()


# --------------------------------------------------------------------------------------------
# Exit status and signals
# --------------------------------------------------------------------------------------------


def test_a_non_zero_exit_is_a_failure_with_exit_status_code_and_stderr_tail(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\necho 'disk is on fire' >&2\necho '{}'\nexit 3\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "exit_status")
    assert call.outcome.exit_code == 3
    assert error_message(call) == "exit status 3"
    assert call.outcome.stderr_tail == "disk is on fire\n"
    assert call.stderr_lines() == ["disk is on fire"]


def test_death_by_sigsegv_is_a_failure_naming_the_signal(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\nulimit -c 0\necho crashing >&2\nkill -SEGV $$\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "killed_by_signal")
    assert "SIGSEGV" in error_message(call)
    assert call.outcome.signal == "SIGSEGV"
    assert call.outcome.exit_code is None
    assert call.outcome.stderr_tail == "crashing\n"


# --------------------------------------------------------------------------------------------
# Timeouts
# --------------------------------------------------------------------------------------------


def test_a_hung_skill_is_sent_sigterm_at_its_timeout_and_the_call_is_timed_out(
    root: Path,
) -> None:
    runner = SubprocessRunner(kill_grace=5, linger=0.2)
    spec = script_skill(root, "#!/bin/sh\necho $$ > main.pid\nexec sleep 30\n", timeout=0.3)
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.TIMED_OUT, "timed_out")
    assert call.outcome.signal == "SIGTERM"  # it died of the SIGTERM: no SIGKILL was needed
    assert call.outcome.exit_code is None
    assert 0.25 <= call.elapsed < 3
    assert_gone(read_int_file(root / "skill" / "main.pid"))


def test_a_hung_call_started_after_a_longer_one_still_times_out_at_its_own_deadline(
    root: Path,
) -> None:
    # The calls of a runner share one timer, armed at the earliest deadline: a later call with
    # a shorter timeout must re-arm it, and the longer call must keep running past it.
    runner = SubprocessRunner(kill_grace=5, linger=0.2)
    slow_body = "#!/bin/sh\nsleep 1\necho '{\"slow\": 1}'\n"
    slow = script_skill(root, slow_body, folder="slow", timeout=30)
    hung = script_skill(root, "#!/bin/sh\nexec sleep 30\n", folder="hung", timeout=0.3)

    async def both() -> tuple[RunOutcome, RunOutcome]:
        first = asyncio.ensure_future(runner.run(slow, b"{}"))
        await until(lambda: runner.calls == 1, "the slow call's spawn")  # its deadline is in
        hung_outcome = await runner.run(hung, b"{}")  # while the slow one runs
        assert not first.done()
        return await first, hung_outcome

    slow_outcome, hung_outcome = asyncio.run(both())
    assert hung_outcome.status == Status.TIMED_OUT and hung_outcome.signal == "SIGTERM"
    assert hung_outcome.duration_ms is not None
    assert 250 <= hung_outcome.duration_ms < 900  # at its own 0.3 s, not at the other's 30 s
    assert slow_outcome.status == Status.SUCCEEDED and slow_outcome.result == {"slow": 1}


def test_a_skill_ignoring_sigterm_with_grandchildren_is_killed_after_the_grace(
    root: Path,
) -> None:
    runner = SubprocessRunner(kill_grace=0.3, linger=0.2)
    script = (
        "#!/bin/sh\n"
        "trap '' TERM\n"
        "sleep 30 & echo $! > gc1.pid\n"
        "sleep 30 & echo $! > gc2.pid\n"
        "(trap '' TERM; while :; do sleep 30; done) & echo $! > gc3.pid\n"
        "echo started >&2\n"
        "while :; do wait; done\n"
    )
    spec = script_skill(root, script, timeout=0.3)
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.TIMED_OUT, "timed_out")
    assert call.outcome.signal == "SIGKILL"
    assert call.elapsed >= 0.3 + 0.3 - 0.05
    assert call.elapsed < 3
    assert "started" in call.stderr_lines()
    folder = root / "skill"
    assert_gone(*(read_int_file(folder / f"gc{i}.pid") for i in (1, 2, 3)))


def test_the_default_kill_grace_is_two_seconds_between_sigterm_and_sigkill(
    root: Path, binaries: dict[str, Path]
) -> None:
    runner = SubprocessRunner()
    spec = install_binary(root, binaries["term_logger"], timeout=0.2)
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.TIMED_OUT, "timed_out")
    assert call.outcome.signal == "SIGKILL"
    assert call.stderr_lines() == ["ready", "got SIGTERM"]
    assert call.outcome.started_at is not None
    # SIGTERM came at the 0.2 s timeout, SIGKILL only 2 s later.
    assert call.of_type("stderr")[1].ts - call.outcome.started_at < 1.5
    assert 0.2 + 2.0 - 0.1 <= call.elapsed < 4


# --------------------------------------------------------------------------------------------
# Lingering descendants and daemons
# --------------------------------------------------------------------------------------------


def test_a_background_child_holding_stdout_is_waited_for_at_most_the_default_one_second(
    root: Path,
) -> None:
    runner = SubprocessRunner()
    assert runner.linger == 1.0
    spec = script_skill(
        root, "#!/bin/sh\nsleep 30 &\necho $! > bg.pid\necho '{\"done\": true}'\n", timeout=20
    )
    call = run_call(runner, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.outcome.result == {"done": True}
    assert 1.0 - 0.05 <= call.elapsed < 2.5
    assert_gone(read_int_file(root / "skill" / "bg.pid"))


def test_a_background_child_holding_stderr_is_killed_after_a_short_linger(
    root: Path,
) -> None:
    runner = SubprocessRunner(kill_grace=0.2, linger=0.15)
    script = (
        "#!/bin/sh\n"
        "(echo child-says-hi >&2; exec sleep 30) >/dev/null &\n"
        "echo $! > bg.pid\n"
        "echo '{\"done\": 1}'\n"
    )
    spec = script_skill(root, script, timeout=20)
    call = run_call(runner, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.elapsed < 1.5
    assert_gone(read_int_file(root / "skill" / "bg.pid"))


def test_a_lingering_child_with_invalid_stdout_still_fails_as_invalid_output(
    root: Path,
) -> None:
    runner = SubprocessRunner(kill_grace=0.2, linger=0.1)
    spec = script_skill(root, "#!/bin/sh\nsleep 30 &\necho $! > bg.pid\necho 'not json'\n")
    call = run_call(runner, spec)
    assert_failure_shape(call, Status.FAILED, "invalid_output")
    assert_gone(read_int_file(root / "skill" / "bg.pid"))


DAEMON = (
    # The daemon records its pid and its /proc stat line only once it runs in its own session.
    'setsid sh -c \'read s < /proc/self/stat; echo "$s" > daemon.stat; '
    "echo $$ > daemon.tmp; mv daemon.tmp daemon.pid; exec sleep 30' {redirect} &\n"
    "while [ ! -e daemon.pid ]; do :; done\n"
)


def _daemon_ids(folder: Path) -> tuple[int, int]:
    """(pid, session id) the daemon recorded."""
    pid = read_int_file(folder / "daemon.pid")
    raw = (folder / "daemon.stat").read_text()
    fields = raw[raw.rfind(")") + 2 :].split()
    return pid, int(fields[3])


def test_a_setsid_daemon_holding_no_pipes_is_killed_as_an_orphan_after_the_call(
    root: Path, fast: SubprocessRunner
) -> None:
    script = "#!/bin/sh\necho $$ > main.pid\n"
    script += DAEMON.format(redirect="</dev/null >/dev/null 2>&1")
    script += "echo '{\"ok\": true}'\n"
    spec = script_skill(root, script)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    folder = root / "skill"
    daemon, daemon_sid = _daemon_ids(folder)
    main = read_int_file(folder / "main.pid")
    assert daemon_sid == daemon != main  # it escaped the call's session and group
    assert call.outcome.orphans_killed >= 1
    assert call.elapsed < 1.5
    assert_gone(daemon, main)


def test_a_setsid_daemon_that_forked_workers_is_killed_with_its_workers(
    root: Path, fast: SubprocessRunner
) -> None:
    script = (
        "#!/bin/sh\n"
        "setsid sh -c 'echo $$ > daemon.tmp; mv daemon.tmp daemon.pid; "
        "sleep 30 & echo $! > worker.tmp; mv worker.tmp worker.pid; wait' "
        "</dev/null >/dev/null 2>&1 &\n"
        "while [ ! -e worker.pid ]; do :; done\n"
        "echo '{\"ok\": true}'\n"
    )
    spec = script_skill(root, script)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    folder = root / "skill"
    daemon = read_int_file(folder / "daemon.pid")
    worker = read_int_file(folder / "worker.pid")
    assert call.outcome.orphans_killed >= 2
    # Killed by the sweep of this very call, not left for some later call's sweep.
    assert_gone(daemon, worker)


def test_a_setsid_daemon_holding_stdout_does_not_hang_the_call_and_is_killed(
    root: Path, fast: SubprocessRunner
) -> None:
    script = "#!/bin/sh\n" + DAEMON.format(redirect="") + "echo '{\"ok\": true}'\n"
    spec = script_skill(root, script, timeout=20)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    daemon, daemon_sid = _daemon_ids(root / "skill")
    assert daemon_sid == daemon
    assert call.outcome.orphans_killed >= 1
    assert 0.15 <= call.elapsed < 1.5  # waited for the linger, not for the daemon
    assert_gone(daemon)


# --------------------------------------------------------------------------------------------
# stderr: streaming, caps, budget, tail, progress
# --------------------------------------------------------------------------------------------


def test_stderr_lines_are_streamed_as_they_are_produced_not_at_the_end(
    root: Path, fast: SubprocessRunner
) -> None:
    script = (
        "#!/bin/sh\n"
        "echo 'step one' >&2\n"
        "while [ ! -e go ]; do sleep 0.01; done\n"
        "echo 'step two' >&2\n"
        "echo '{\"ok\": true}'\n"
    )
    spec = script_skill(root, script, timeout=5)
    go = root / "skill" / "go"

    def on_event(event: Event) -> None:
        # The child only carries on once we have seen its first line: streaming or deadlock.
        if event.type == "stderr" and event.data["line"] == "step one":
            go.touch()

    call = run_call(fast, spec, on_event=on_event)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.stderr_lines() == ["step one", "step two"]
    first, second = call.of_type("stderr")
    assert first.ts <= second.ts
    assert isinstance(first.ts, float)


def test_stderr_is_still_streamed_while_the_child_runs_once_a_long_quiet_start_is_over(
    root: Path,
) -> None:
    # A quiet start watches only the child's exit at first: a child still running when it ends
    # gets its stderr lines streamed from then on (the child waits for its first line to be seen).
    runner = SubprocessRunner(kill_grace=0.2, linger=0.2, quiet_start=0.2)
    script = (
        "#!/bin/sh\n"
        "echo 'step one' >&2\n"
        "while [ ! -e go ]; do sleep 0.01; done\n"
        "echo '{\"ok\": true}'\n"
    )
    spec = script_skill(root, script, timeout=5)
    go = root / "skill" / "go"

    def on_event(event: Event) -> None:
        if event.type == "stderr" and event.data["line"] == "step one":
            go.touch()

    call = run_call(runner, spec, on_event=on_event)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.stderr_lines() == ["step one"]


def test_a_call_started_beside_another_streams_its_stderr_at_once_without_a_quiet_start(
    root: Path,
) -> None:
    # The quiet start is for a call started alone: one started while another runs watches its
    # pipes from the start (its first line is seen long before the 30 s quiet start would end).
    runner = SubprocessRunner(kill_grace=0.2, linger=0.2, quiet_start=30)
    waits = "while [ ! -e go ]; do sleep 0.01; done\n"
    first = script_skill(root, f"#!/bin/sh\n{waits}echo '{{}}'\n", folder="first", timeout=10)
    second = script_skill(
        root, f"#!/bin/sh\necho 'step one' >&2\n{waits}echo '{{}}'\n", folder="second", timeout=10
    )
    seen: list[str] = []

    def on_event(event: Event) -> None:
        if event.type == "stderr":
            seen.append(event.data["line"])

    async def scenario() -> tuple[RunOutcome, RunOutcome]:
        one = asyncio.ensure_future(runner.run(first, b"{}"))
        await until(lambda: runner.calls == 1, what="the first call's spawn")
        two = asyncio.ensure_future(runner.run(second, b"{}", on_event))
        try:
            await until(lambda: seen == ["step one"], what="the second call's line", timeout=5)
        finally:
            (root / "first" / "go").touch()
            (root / "second" / "go").touch()
        return await one, await two

    done_first, done_second = asyncio.run(scenario())
    assert done_first.status is Status.SUCCEEDED, done_first.error
    assert done_second.status is Status.SUCCEEDED, done_second.error


def test_a_child_filling_its_pipes_during_a_quiet_start_is_drained_once_it_ends(
    root: Path,
) -> None:
    # 300 KB on stdout and 100 KB on stderr: more than the pipes hold, so the child blocks until
    # the quiet start ends and the runner reads; nothing is lost or stuck.
    runner = SubprocessRunner(kill_grace=0.2, linger=0.2, quiet_start=0.1)
    code = (
        "import sys\n"
        "for i in range(1000):\n"
        "    sys.stderr.write('line %d %s\\n' % (i, 'e' * 90))\n"
        "sys.stderr.flush()\n"
        "sys.stdout.write('{\"blob\": \"' + 'x' * 300000 + '\"}')\n"
    )
    spec = python_skill(root, code)
    call = run_call(runner, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.outcome.result == {"blob": "x" * 300_000}
    lines = call.stderr_lines()
    assert len(lines) == 1000
    assert lines[-1].startswith("line 999 ")


def test_non_utf8_bytes_on_stderr_are_replaced_without_crashing(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\nprintf 'bad \\377\\376 bytes\\n' >&2\necho '{}'\n")
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert call.stderr_lines() == ["bad \ufffd\ufffd bytes"]
    assert call.outcome.stderr_tail == "bad \ufffd\ufffd bytes\n"


def test_a_10_mb_stderr_line_is_cut_at_8_kib_and_marked_and_the_call_succeeds(
    root: Path, fast: SubprocessRunner
) -> None:
    code = (
        "import sys\n"
        "w = sys.stderr.buffer\n"
        "w.write(b'a' * 10_000_000 + b'END\\n')\n"
        "w.write(b'next line\\n')\n"
        "w.flush()\n"
        "print('{\"ok\": true}')\n"
    )
    spec = python_skill(root, code, timeout=10)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    stderr = call.of_type("stderr")
    assert len(stderr) == 2
    assert stderr[0].data == {"line": "a" * LINE_CAP, "truncated": True}
    assert stderr[1].data == {"line": "next line"}
    assert call.outcome.stderr_tail.endswith("aEND\nnext line\n")
    assert len(call.outcome.stderr_tail.encode()) == TAIL_BYTES


def test_more_than_1_mib_of_stderr_gives_one_truncated_event_and_stderr_is_still_drained(
    root: Path, fast: SubprocessRunner
) -> None:
    line = "x" * 99
    count = 30_000  # 3 MB: far past both the 1 MiB budget and any pipe buffer
    code = (
        "import sys\n"
        f"sys.stderr.write(({line!r} + '\\n') * {count})\n"
        "sys.stderr.write('the very end\\n')\n"
        "sys.stderr.flush()\n"
        "print('{\"ok\": true}')\n"
    )
    spec = python_skill(root, code, timeout=10)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    truncated = call.of_type("stderr_truncated")
    assert len(truncated) == 1
    lines = call.stderr_lines()
    assert 0 < len(lines) < count
    assert set(lines) == {line}
    assert sum(len(x) + 1 for x in lines) <= STDERR_BUDGET
    # The truncation event comes after every stderr event that was kept.
    assert call.events.index(truncated[0]) == len(call.events) - 1
    assert call.outcome.stderr_tail.endswith(line + "\nthe very end\n")


def test_stderr_tail_holds_at_most_4_kib_and_the_last_bytes(
    root: Path, fast: SubprocessRunner
) -> None:
    code = (
        "import sys\nsys.stderr.write(''.join('%06d\\n' % i for i in range(3000)))\nprint('{}')\n"
    )
    spec = python_skill(root, code)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    written = "".join(f"{i:06d}\n" for i in range(3000))
    assert len(written) > TAIL_BYTES
    assert call.outcome.stderr_tail == written[-TAIL_BYTES:]
    assert len(call.stderr_lines()) == 3000


def test_a_progress_line_becomes_a_progress_event_instead_of_a_stderr_event(
    root: Path, fast: SubprocessRunner
) -> None:
    script = (
        "#!/bin/sh\n"
        'echo \'{"progress": 3, "total": 10, "message": "x"}\' >&2\n'
        "echo '{\"progress\": 0.5}' >&2\n"
        'echo \'{"progress": "half"}\' >&2\n'
        "echo '{\"progress\": true}' >&2\n"
        "echo '{\"other\": 1}' >&2\n"
        "echo '{\"progress\": 4' >&2\n"
        "echo 'plain' >&2\n"
        "echo '{}'\n"
    )
    spec = script_skill(root, script)
    call = run_call(fast, spec)
    assert call.outcome.status is Status.SUCCEEDED, call.outcome.error
    assert [(e.type, e.data) for e in call.events] == [
        ("progress", {"progress": 3, "total": 10, "message": "x"}),
        ("progress", {"progress": 0.5}),
        ("stderr", {"line": '{"progress": "half"}'}),
        ("stderr", {"line": '{"progress": true}'}),
        ("stderr", {"line": '{"other": 1}'}),
        ("stderr", {"line": '{"progress": 4'}),
        ("stderr", {"line": "plain"}),
    ]


def test_a_last_stderr_line_without_newline_is_still_emitted(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\nprintf 'one\\r\\ntwo' >&2\necho '{}'\n")
    call = run_call(fast, spec)
    assert call.stderr_lines() == ["one", "two"]


def test_a_raising_event_sink_does_not_break_the_call(root: Path, fast: SubprocessRunner) -> None:
    spec = script_skill(root, "#!/bin/sh\necho a >&2\necho b >&2\necho '{}'\n")

    def explode(_event: Event) -> None:
        raise RuntimeError("watcher bug")

    call = run_call(fast, spec, on_event=explode)
    assert call.outcome.status is Status.SUCCEEDED
    assert call.stderr_lines() == ["a", "b"]


# --------------------------------------------------------------------------------------------
# The entry, re-checked just before the spawn
# --------------------------------------------------------------------------------------------

# Every call checks its entry again, whatever the calls before it found: each case runs on a
# fresh runner and on one that already ran the entry.
WHETHER_RAN_BEFORE = pytest.mark.parametrize(
    "ran_before", [False, True], ids=["first-call", "after-a-call"]
)


def checked_skill(root: Path, runner: SubprocessRunner, ran_before: bool) -> SpawnSpec:
    spec = script_skill(root, "#!/bin/sh\necho '{}'\n")
    if ran_before:
        assert run_call(runner, spec).outcome.status == Status.SUCCEEDED
    return spec


@WHETHER_RAN_BEFORE
def test_an_entry_swapped_for_a_symlink_outside_the_root_after_loading_is_rejected_unrun(
    root: Path, fast: SubprocessRunner, tmp_path: Path, ran_before: bool
) -> None:
    spec = checked_skill(root, fast, ran_before)
    marker = tmp_path / "escaped-ran"
    outside = write_executable(
        tmp_path / "outside" / "evil.sh", f"#!/bin/sh\n: > {marker}\necho '{{}}'\n"
    )
    os.unlink(spec.entry)
    os.symlink(outside, spec.entry)
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "entry_rejected")
    assert "escapes allowlist root" in error_message(call)
    assert call.outcome.exit_code is None
    assert call.events == []
    assert not marker.exists()


@pytest.mark.parametrize("moved", [False, True], ids=["to-a-copy", "to-the-folder-moved-out"])
def test_a_skill_folder_swapped_for_a_symlink_leaving_the_root_after_a_call_is_refused(
    root: Path, fast: SubprocessRunner, tmp_path: Path, moved: bool
) -> None:
    # Moved out whole, the entry is the very file that ran (same inode, same times): only
    # resolving its path again shows where it now leads.
    spec = checked_skill(root, fast, ran_before=True)
    folder = Path(spec.entry).parent
    marker = tmp_path / "escaped-ran"
    outside = tmp_path / "outside" / folder.name
    if moved:
        outside.parent.mkdir()
        folder.rename(outside)
    else:
        write_executable(outside / Path(spec.entry).name, f"#!/bin/sh\n: > {marker}\necho '{{}}'\n")
        folder.rename(tmp_path / "moved-away")
    folder.symlink_to(outside)
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "entry_rejected")
    assert "escapes allowlist root" in error_message(call)
    assert call.events == []
    assert not marker.exists()


@WHETHER_RAN_BEFORE
def test_an_entry_deleted_before_the_call_is_rejected(
    root: Path, fast: SubprocessRunner, ran_before: bool
) -> None:
    spec = checked_skill(root, fast, ran_before)
    os.unlink(spec.entry)
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "entry_rejected")
    assert "does not exist" in error_message(call)


@WHETHER_RAN_BEFORE
def test_an_entry_made_non_executable_before_the_call_is_rejected(
    root: Path, fast: SubprocessRunner, ran_before: bool
) -> None:
    spec = checked_skill(root, fast, ran_before)
    make_unreadable_by_exec(Path(spec.entry))
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "entry_rejected")
    assert "not executable" in error_message(call)


@WHETHER_RAN_BEFORE
def test_an_entry_replaced_by_a_directory_is_rejected(
    root: Path, fast: SubprocessRunner, ran_before: bool
) -> None:
    spec = checked_skill(root, fast, ran_before)
    os.unlink(spec.entry)
    os.mkdir(spec.entry)
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "entry_rejected")
    assert "not a regular file" in error_message(call)


@pytest.mark.parametrize(
    "body",
    [
        'echo \'{"no": "shebang"}\'\n',
        b"\x7fELF\x02\x01\x01garbage-not-a-real-binary" + bytes(range(256)),
        b"\x00\x01\x02\x03 random bytes \xff\xfe",
        "#!/nonexistent/interpreter\necho '{}'\n",
        "",
    ],
    ids=["no-shebang", "fake-elf", "random-bytes", "missing-interpreter", "empty-file"],
)
def test_a_file_the_kernel_cannot_execute_fails_cleanly_without_crashing(
    root: Path, fast: SubprocessRunner, body: str | bytes
) -> None:
    spec = script_skill(root, body)
    call = run_call(fast, spec)
    out = call.outcome
    assert out.status is Status.FAILED
    assert out.error is not None
    assert out.error.code in {"spawn_failed", "exit_status"}, out.error
    assert out.result is None
    if out.error.code == "spawn_failed":
        assert spec.entry in out.error.message


# --------------------------------------------------------------------------------------------
# Cancellation
# --------------------------------------------------------------------------------------------


CANCEL_SCRIPT = (
    "#!/bin/sh\necho $$ > main.pid\nsleep 30 &\necho $! > gc.tmp; mv gc.tmp gc.pid\nwait\n"
)


def test_cancelling_the_awaiting_task_kills_the_group_and_raises_cancelled_error(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, CANCEL_SCRIPT, timeout=30)
    folder = root / "skill"
    run_call(fast, script_skill(root, "#!/bin/sh\necho '{}'\n", folder="warm"))  # its epoll
    fds_before = open_fds()

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(fast.run(spec, b"{}"))
        await until((folder / "gc.pid").exists, what="the grandchild")
        main = int((folder / "main.pid").read_text())
        grandchild = int((folder / "gc.pid").read_text())
        assert proc_stat(grandchild) is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Keep the loop running: whatever the runner reaps in the background may finish.
        await until(
            lambda: pid_gone(main) and pid_gone(grandchild), timeout=3, what="the group to die"
        )
        return main, grandchild

    main, grandchild = asyncio.run(scenario())
    assert pid_gone(main)
    assert pid_gone(grandchild)
    assert open_fds() == fds_before


def test_cancelling_a_call_also_kills_the_setsid_daemon_it_started(
    root: Path, fast: SubprocessRunner
) -> None:
    script = (
        "#!/bin/sh\n" + DAEMON.format(redirect="</dev/null >/dev/null 2>&1") + "exec sleep 30\n"
    )
    spec = script_skill(root, script, timeout=30)
    folder = root / "skill"

    async def scenario() -> int:
        task = asyncio.create_task(fast.run(spec, b"{}"))
        await until((folder / "daemon.pid").exists, what="the daemon")
        daemon = read_int_file(folder / "daemon.pid")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: pid_gone(daemon), timeout=3, what="the daemon to die")
        return daemon

    assert pid_gone(asyncio.run(scenario()))


def test_a_call_cancelled_by_wait_for_timeout_leaves_nothing_running(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(
        root, "#!/bin/sh\necho $$ > main.tmp; mv main.tmp main.pid\nexec sleep 30\n", timeout=30
    )
    folder = root / "skill"

    async def scenario() -> int:
        run = asyncio.ensure_future(fast.run(spec, b"{}"))
        await until((folder / "main.pid").exists, what="the child")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run, 0.01)
        main = int((folder / "main.pid").read_text())
        await until(lambda: pid_gone(main), timeout=3, what="the child to be reaped")
        return main

    assert pid_gone(asyncio.run(scenario()))


def our_children_in(folder: Path) -> list[int]:
    """Live children of this process whose cwd is ``folder``."""
    found = []
    for name in os.listdir("/proc"):
        info = proc_stat(int(name)) if name.isdigit() else None
        if info is None or info[1] != os.getpid() or info[0] == "Z":
            continue
        try:
            if os.readlink(f"/proc/{name}/cwd") == str(folder):
                found.append(int(name))
        except OSError:
            continue
    return found


def test_calls_cancelled_while_others_spawn_them_in_threads_leave_no_child_and_no_fd(
    root: Path, fast: SubprocessRunner
) -> None:
    # With calls in flight, the runner spawns in worker threads: a call cancelled during that
    # spawn must still have its child killed and reaped, and its pipes closed.
    spec = script_skill(root, "#!/bin/sh\nexec sleep 30\n", timeout=30)
    folder = root / "skill"
    run_call(fast, script_skill(root, "#!/bin/sh\necho '{}'\n", folder="warm"))
    fds_before = open_fds()
    zombies_before = zombie_children()

    async def scenario() -> None:
        calls = [asyncio.ensure_future(fast.run(spec, b"{}")) for _ in range(8)]
        for delay in (0.0, 0.0005, 0.002, 0.01, 0.05):  # some mid-spawn, some running
            await asyncio.sleep(delay)
            calls.append(asyncio.ensure_future(fast.run(spec, b"{}")))
        await asyncio.sleep(0.001)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await until(lambda: not our_children_in(folder), timeout=5, what="no child left")
        # A child still starting when it was killed may die after the cancelled call stopped
        # waiting for it (0.1 s): the loop reaps it then, so it must run until that is done.
        await until(lambda: zombie_children() <= zombies_before, timeout=5, what="reaped")

    asyncio.run(scenario())
    assert not our_children_in(folder)
    wait_for(lambda: open_fds() == fds_before, timeout=5, what="every pipe closed")
    wait_for(lambda: zombie_children() <= zombies_before, timeout=5, what="no zombie")


def test_a_runner_keeps_its_descriptors_between_calls_which_a_new_loop_replaces_and_close_ends(
    root: Path, fast: SubprocessRunner
) -> None:
    # Its epoll stays open while idle (making one per call added 20-90 µs to a serial call);
    # calls on a new event loop close the one of the old loop: nothing grows with the loops.
    spec = script_skill(root, "#!/bin/sh\necho '{}'\n")
    run_call(fast, spec)  # the first call sets up the runner's lasting state
    kept = open_fds()
    for _ in range(5):  # a new loop each
        assert run_call(fast, spec).outcome.status is Status.SUCCEEDED
        assert open_fds() == kept

    async def serial() -> None:
        inside = open_fds()  # with this loop's own descriptors
        for _ in range(20):
            assert (await fast.run(spec, b"{}")).status is Status.SUCCEEDED
            assert open_fds() == inside

    asyncio.run(serial())
    assert open_fds() == kept
    fast.close()  # its owner is done with it: the kept epoll goes too, and the helper's timer
    assert open_fds() == kept - (2 if isinstance(fast.spawner, HelperSpawner) else 1)
    assert run_call(fast, spec).outcome.status is Status.SUCCEEDED  # and comes back on use
    assert open_fds() == kept


# A runner whose epoll the parent's loop watches; a forked child calls on a loop of its own,
# then the parent calls again on its loop (each call with a deadline).
FORKED_CALLS = """
import asyncio, os, sys
from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

here = sys.argv[1]
runner = SubprocessRunner(reap_orphans=False, supervise=False)
spec = SpawnSpec(os.path.join(here, "echo"), here, here, {}, 10.0)

async def call():
    try:
        return (await asyncio.wait_for(runner.run(spec, b"{}"), 10)).status.value
    except TimeoutError:
        return "no answer"

loop = asyncio.new_event_loop()
print("parent:", loop.run_until_complete(call()), flush=True)
pid = os.fork()
if pid == 0:
    print("child:", asyncio.run(call()), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent again:", loop.run_until_complete(call()), flush=True)
"""


def test_a_call_in_a_forked_child_leaves_the_parents_runner_working(tmp_path: Path) -> None:
    # The child's first call replaces the poller of the parent's loop: closing it must not
    # remove its reader from that loop's selector, an epoll the child shares with the parent.
    echo = tmp_path / "echo"
    echo.write_text("#!/bin/sh\necho '{}'\n")
    echo.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", FORKED_CALLS, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == [
        "parent: succeeded",
        "child: succeeded",
        "parent again: succeeded",
    ], done.stderr


def test_a_call_on_another_threads_loop_leaves_the_poller_of_a_running_loop_alone(
    root: Path,
) -> None:
    # A call on thread A's loop is between getting its poller's epoll and the spawn (held here)
    # when a call starts on the main thread's loop: that loop must not close the epoll under
    # thread A (the spawn would add the child to a closed, or reused, descriptor, and thread A
    # would make another epoll that nothing ever closes). Without a quiet start, so that the
    # spawn is given the epoll (a quiet start adds the pidfd to it after the spawn).
    fast = SubprocessRunner(kill_grace=0.2, linger=0.2, quiet_start=0)
    spec = script_skill(root, "#!/bin/sh\necho '{}'\n")
    run_call(fast, spec)  # chooses the spawner
    kept = open_fds()  # with the runner's epoll
    real = fast.spawner
    assert real is not None
    in_spawn, go = threading.Event(), threading.Event()
    still_given: list[bool] = []  # whether the epoll the spawn got was still that one after

    class Held:
        name = real.name
        checks_entry = False

        def spawn(
            self,
            path: str,
            cwd: str,
            env: Mapping[str, str],
            payload: bytes,
            epoll_fd: int,
            conf: Sequence[int] | None = None,
            quiet: bool = False,
            check: bool = False,
            timer: int = -1,
            quiet_ns: int = 0,
        ) -> Child:
            if epoll_fd >= 0 and not go.is_set():
                given = os.fstat(epoll_fd).st_ino
                in_spawn.set()
                go.wait(30)
                try:
                    still_given.append(os.fstat(epoll_fd).st_ino == given)
                except OSError:  # closed
                    still_given.append(False)
            args = (path, cwd, env, payload, epoll_fd, conf, quiet, check, timer, quiet_ns)
            return real.spawn(*args)

        def quiet_timer(self) -> int:
            return real.quiet_timer()

    fast.spawner = Held()
    first: list[object] = []

    async def bounded() -> RunOutcome:
        return await asyncio.wait_for(fast.run(spec, b"{}"), 10)

    def on_thread() -> None:
        try:
            first.append(asyncio.run(bounded()).status)
        except BaseException as exc:
            first.append(exc)

    thread = threading.Thread(target=on_thread)
    thread.start()
    try:
        assert in_spawn.wait(30)
        second = asyncio.run(bounded())
    finally:
        go.set()
        thread.join(30)
    assert second.status is Status.SUCCEEDED
    assert first == [Status.SUCCEEDED]
    assert still_given == [True]
    fast.close()  # its epoll, and the helper's quiet-start timer
    assert open_fds() == kept - (2 if isinstance(real, HelperSpawner) else 1)


def cancel_once_started(runner: SubprocessRunner, spec: SpawnSpec, folder: Path) -> None:
    """``asyncio.run(wait_for(run(...), t))`` once the call's grandchild is up: the loop closes
    as soon as the cancellation is done."""

    async def scenario() -> None:
        run = asyncio.ensure_future(runner.run(spec, b"{}"))
        await until((folder / "gc.pid").exists, what="the grandchild")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run, 0.001)

    asyncio.run(scenario())


def test_a_call_cancelled_right_before_its_event_loop_closes_leaks_no_fd_and_no_zombie(
    root: Path, fast: SubprocessRunner
) -> None:
    # asyncio.run(wait_for(run(...), t)): the loop closes as soon as the cancellation is done,
    # so nothing may be left for a loop callback that will never run.
    spec = script_skill(root, CANCEL_SCRIPT, timeout=30)
    folder = root / "skill"
    zombies_before = zombie_children()

    run_call(fast, script_skill(root, "#!/bin/sh\necho '{}'\n", folder="warm"))
    fds_before = open_fds()
    pids: list[int] = []
    for _ in range(3):
        for name in ("main.pid", "gc.pid"):
            (folder / name).unlink(missing_ok=True)
        cancel_once_started(fast, spec, folder)
        pids += [read_int_file(folder / "main.pid"), read_int_file(folder / "gc.pid")]
    assert_gone(*pids)
    assert open_fds() == fds_before
    assert zombie_children() <= zombies_before


def test_a_cancelled_call_whose_child_outlives_its_sigkill_is_reaped_after_its_loop_closed(
    root: Path, fast: SubprocessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A child in uninterruptible sleep can take longer than ABANDON_REAP_SECONDS to die once
    # killed; the loop that ran the call may be gone by then. Here every child counts as slow.
    monkeypatch.setattr(call_module, "exits_within", lambda _pidfd, _seconds: False)
    spec = script_skill(root, CANCEL_SCRIPT, timeout=30)
    folder = root / "skill"
    zombies_before = zombie_children()

    warm = script_skill(root, "#!/bin/sh\necho '{}'\n", folder="warm")
    run_call(fast, warm)
    fds_before = open_fds()
    cancel_once_started(fast, spec, folder)
    assert_gone(read_int_file(folder / "main.pid"))
    wait_for(lambda: open_fds() == fds_before, what="the pidfd of the killed child to close")
    # The sweep of what the call left may not have run on the closed loop: the next call's does.
    run_call(fast, warm)
    assert_gone(read_int_file(folder / "gc.pid"))
    assert zombie_children() <= zombies_before


def test_a_cancelled_slow_child_is_reaped_by_the_loop_when_no_thread_can_be_started(
    root: Path, fast: SubprocessRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_thread(_pidfd: int, _then: object) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(call_module, "exits_within", lambda _pidfd, _seconds: False)
    monkeypatch.setattr(call_module, "after_exit", no_thread)
    spec = script_skill(root, CANCEL_SCRIPT, timeout=30)
    folder = root / "skill"
    zombies_before = zombie_children()

    async def scenario() -> None:
        await fast.run(script_skill(root, "#!/bin/sh\necho '{}'\n", folder="warm"), b"{}")
        fds_before = open_fds()  # this loop's and the runner's descriptors included
        run = asyncio.ensure_future(fast.run(spec, b"{}"))
        await until((folder / "gc.pid").exists, what="the grandchild")
        run.cancel()
        with pytest.raises(asyncio.CancelledError):  # not the RuntimeError
            await run
        await until(lambda: open_fds() == fds_before, what="the killed child's pidfd to close")

    asyncio.run(scenario())
    assert_gone(read_int_file(folder / "main.pid"), read_int_file(folder / "gc.pid"))
    assert zombie_children() <= zombies_before


# --------------------------------------------------------------------------------------------
# Concurrency and leaks
# --------------------------------------------------------------------------------------------


def test_concurrent_calls_each_get_their_own_result_and_timeline(
    root: Path, fast: SubprocessRunner
) -> None:
    specs = [
        script_skill(
            root,
            f'#!/bin/sh\nread line\necho \'from {i}\' >&2\necho "{{\\"got\\": $line}}"\n',
            folder=f"s{i}",
        )
        for i in range(12)
    ]

    async def scenario() -> list[tuple[int, list[Event], RunOutcome]]:
        async def one(i: int) -> tuple[int, list[Event], RunOutcome]:
            events: list[Event] = []
            out = await fast.run(specs[i], f"{i}\n".encode(), events.append)
            return i, events, out

        return list(await asyncio.gather(*(one(i) for i in range(12))))

    for i, events, out in asyncio.run(scenario()):
        assert out.status is Status.SUCCEEDED, out.error
        assert out.result == {"got": i}
        assert [e.data["line"] for e in events] == [f"from {i}"]


def test_two_hundred_calls_leave_no_zombie_and_no_open_file_descriptor(
    root: Path, binaries: dict[str, Path]
) -> None:
    runner = SubprocessRunner(kill_grace=0.1, linger=0.05)
    trivial = install_binary(root, binaries["trivial"], folder="trivial")
    hostile = [
        script_skill(root, "#!/bin/sh\nexit 4\n", folder="fail"),
        script_skill(root, "#!/bin/sh\nsleep 30 &\necho '{}'\n", folder="linger"),
        script_skill(
            root,
            "#!/bin/sh\nsetsid sleep 30 </dev/null >/dev/null 2>&1 &\necho '{}'\n",
            folder="daemon",
        ),
        script_skill(root, "#!/bin/sh\nexec sleep 30\n", folder="hang", timeout=0.05),
        script_skill(root, "#!/bin/sh\nkill -KILL $$\n", folder="killed"),
        script_skill(root, "no shebang\n", folder="noexec"),
    ]
    zombies_before = zombie_children()
    run_call(runner, trivial)  # warm up lazily created state (reaper, executor, …)

    async def many() -> list[object]:
        outs: list[object] = []
        for _ in range(120):
            outs.append((await runner.run(trivial, b'{"n": 1}')).status)
        for _ in range(8):
            batch = await asyncio.gather(*(runner.run(trivial, b"{}") for _ in range(8)))
            outs.extend(o.status for o in batch)
        for spec in hostile:
            for _ in range(3):
                outs.append((await runner.run(spec, b"{}")).status)
        return outs

    fds_before = open_fds_settled()  # a count here has been seen to drop by a collection
    statuses = asyncio.run(many())
    assert len(statuses) == 120 + 64 + 3 * len(hostile)
    assert statuses.count(Status.SUCCEEDED) == 120 + 64 + 6
    assert open_fds() == fds_before
    wait_for(lambda: zombie_children() <= zombies_before, timeout=2, what="no zombie children left")


# --------------------------------------------------------------------------------------------
# End to end through the public API
# --------------------------------------------------------------------------------------------


def test_execute_through_the_public_api_fills_the_execution_and_orders_the_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_E2E_ALLOWED", "yes")
    monkeypatch.setenv("ONGRID_E2E_SECRET", "must-not-leak")
    skills = canonical_dir(tmp_path / "skills")
    folder = skills / "disk-probe"
    folder.mkdir()
    manifest = {
        "name": "disk_probe",
        "description": "Pretend to free disk; echo what it received.",
        "schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "dry_run": {"type": "boolean", "default": True},
            },
            "required": ["path"],
        },
        "entry": "run.sh",
        "env_allow": ["ONGRID_E2E_ALLOWED", "ONGRID_E2E_UNSET_NAME"],
        "timeout_seconds": 10,
    }
    (folder / "skill.json").write_text(json.dumps(manifest))
    write_executable(
        folder / "run.sh",
        "#!/bin/sh\n"
        "cat > stdin.json\n"
        'echo "allowed=$ONGRID_E2E_ALLOWED secret=$ONGRID_E2E_SECRET" >&2\n'
        'echo \'{"progress": 1, "total": 2, "message": "half way"}\' >&2\n'
        'printf \' {"freed_bytes": 1048576,   "files_deleted": 17}\\n\'\n',
    )
    registry = ongrid_skills.load_registry(external_dirs=[str(skills)], persona_dirs=[])

    # Invalid args: a typed error, every violation listed, nothing spawned.
    with pytest.raises(ongrid_skills.InvalidArgs) as info:
        asyncio.run(ongrid_skills.execute(registry, "disk_probe", {"dry_run": "no"}))
    pointers = {v.pointer for v in info.value.violations}
    assert len(info.value.violations) == 2, info.value.violations
    assert "/dry_run" in pointers
    assert not (folder / "stdin.json").exists()

    events: list[Event] = []
    execution = asyncio.run(
        ongrid_skills.execute(
            registry, "disk_probe", {"path": "/var/cache"}, on_event=events.append
        )
    )
    assert execution.status is Status.SUCCEEDED, execution.error
    assert execution.ok
    assert execution.result == {"freed_bytes": 1048576, "files_deleted": 17}
    assert execution.result_text == '{"freed_bytes": 1048576,   "files_deleted": 17}'
    assert execution.envelope() == execution.result_text
    assert execution.error is None
    assert execution.exit_code == 0
    assert execution.signal is None
    assert execution.stderr_tail.startswith("allowed=yes secret=\n")
    assert execution.duration_ms is not None and execution.duration_ms > 0
    assert execution.orphans_killed == 0
    assert execution.started_at is not None and execution.finished_at is not None
    assert execution.started_at <= execution.finished_at
    # Schema defaults are not injected: the skill got exactly what the caller sent.
    assert json.loads((folder / "stdin.json").read_text()) == {"path": "/var/cache"}

    assert [e.type for e in events] == ["status", "stderr", "progress", "status"]
    assert events[0].data == {"status": "running", "skill": "disk_probe"}
    assert events[1].data == {"line": "allowed=yes secret="}
    assert events[2].data == {"progress": 1, "total": 2, "message": "half way"}
    assert events[-1].data == {"status": "succeeded"}
    assert [e.ts for e in events] == sorted(e.ts for e in events)


def test_execute_reports_a_failing_skill_in_the_execution_without_raising(
    tmp_path: Path,
) -> None:
    skills = canonical_dir(tmp_path / "skills")
    folder = skills / "broken"
    folder.mkdir()
    (folder / "skill.json").write_text(
        json.dumps({"name": "broken_tool", "description": "Always fails.", "entry": "run"})
    )
    write_executable(folder / "run", "#!/bin/sh\necho 'no such table' >&2\nexit 2\n")
    registry = ongrid_skills.load_registry(external_dirs=[str(skills)], persona_dirs=[])
    events: list[Event] = []
    execution = asyncio.run(
        ongrid_skills.execute(registry, "broken_tool", {}, on_event=events.append)
    )
    assert execution.status is Status.FAILED
    assert execution.error is not None and execution.error.code == "exit_status"
    assert execution.exit_code == 2
    assert execution.stderr_tail == "no such table\n"
    envelope = json.loads(execution.envelope())
    assert envelope["error"]["code"] == "exit_status"
    assert envelope["exit_code"] == 2
    assert [e.type for e in events] == ["status", "stderr", "status"]
    assert events[-1].data == {"status": "failed"}


def test_signal_names_are_reported_for_other_signals_too(
    root: Path, fast: SubprocessRunner
) -> None:
    spec = script_skill(root, "#!/bin/sh\nkill -USR1 $$\n")
    call = run_call(fast, spec)
    assert_failure_shape(call, Status.FAILED, "killed_by_signal")
    assert call.outcome.signal == signal.SIGUSR1.name
