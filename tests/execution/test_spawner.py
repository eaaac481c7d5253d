"""The spawners on their own: the C helper (built, cached, refused when unsafe) and the fallback.

Real children (``/bin/cat``, small scripts) and a real compiler; the helper's cache is pointed at
tmp_path where a test builds it afresh.
"""

from __future__ import annotations

import os
import platform
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ongrid_skills.execution import helper_library
from ongrid_skills.execution import spawner as spawner_module
from ongrid_skills.execution.spawner import (
    ENV_SWITCH,
    Child,
    HelperSpawner,
    PopenSpawner,
    Spawner,
    reap_by_pidfd,
    spawner,
)
from tests.support.processes import open_fds, open_fds_settled
from tests.support.runner import require_helper, write_executable

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux spawner")


@pytest.fixture(params=["helper", "subprocess"])
def each(request: pytest.FixtureRequest) -> Spawner:
    if request.param == "helper":
        require_helper()
    return spawner(request.param)


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The helper's cache in tmp_path, nothing resolved yet in this process."""
    require_helper()
    cache = tmp_path / "cache"
    monkeypatch.setattr(helper_library, "cache_dirs", lambda: [cache])
    spawner_module._helper.cache_clear()
    yield cache
    spawner_module._helper.cache_clear()


def finish(child: Child) -> tuple[bytes, int]:
    """Drain stdout to EOF, reap; (stdout, exit status)."""
    if child.stdin is not None:
        os.close(child.stdin)
    out = b""
    while True:
        select.select([child.stdout], [], [])
        chunk = os.read(child.stdout, 65536)
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(child.pid, 0)
    for fd in (child.stdout, child.stderr, child.pidfd):
        if fd is not None:
            os.close(fd)
    child.reaped(os.waitstatus_to_exitcode(status))
    return out, os.waitstatus_to_exitcode(status)


def test_the_helper_is_built_once_into_its_cache_named_by_the_hash_of_its_source(
    fresh_cache: Path,
) -> None:
    assert isinstance(spawner("helper"), HelperSpawner)
    built = list(fresh_cache.glob("spawn-*.so"))
    assert len(built) == 1
    assert oct(fresh_cache.stat().st_mode & 0o777) == "0o700"
    before = built[0].stat().st_mtime_ns
    spawner_module._helper.cache_clear()
    assert isinstance(spawner("helper"), HelperSpawner)
    assert [p.stat().st_mtime_ns for p in fresh_cache.glob("spawn-*.so")] == [before]


def test_a_cache_directory_others_can_write_is_never_loaded_from(fresh_cache: Path) -> None:
    fresh_cache.mkdir()
    fresh_cache.chmod(0o777)
    with pytest.raises(RuntimeError, match="only its owner can write"):
        spawner("helper")
    assert isinstance(spawner("auto"), PopenSpawner)  # and auto falls back
    assert not list(fresh_cache.glob("spawn-*.so"))


def test_a_library_others_can_write_is_refused(fresh_cache: Path) -> None:
    assert isinstance(spawner("helper"), HelperSpawner)
    (built,) = fresh_cache.glob("spawn-*.so")
    built.chmod(0o722)
    spawner_module._helper.cache_clear()
    with pytest.raises(RuntimeError, match="only its owner can write"):
        spawner("helper")


def test_the_switch_off_makes_auto_use_subprocess_but_not_an_explicit_helper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_helper()
    monkeypatch.setenv(ENV_SWITCH, "off")
    assert isinstance(spawner("auto"), PopenSpawner)
    assert isinstance(spawner("helper"), HelperSpawner)
    monkeypatch.setenv(ENV_SWITCH, "auto")
    assert isinstance(spawner("auto"), HelperSpawner)


def test_a_child_gets_the_payload_and_its_pipes_even_when_the_manager_closed_its_std_streams(
    tmp_path: Path,
) -> None:
    # With fds 0-2 closed, the pipes the spawner makes land on them: the child must still get
    # its stdin, stdout and stderr right (no dup2 onto a descriptor that is still needed).
    require_helper()
    out = tmp_path / "out.txt"
    script = f"""
import os, sys
sys.path[:0] = {sys.path!r}
from ongrid_skills.execution.spawner import spawner
os.close(0); os.close(1); os.close(2)
for mode in ("helper", "subprocess"):
    child = spawner(mode).spawn("/bin/cat", "/", {{}}, b"payload-" + mode.encode(), -1)
    assert child.stdin is None
    data = b""
    while True:
        try:
            chunk = os.read(child.stdout, 100)
        except BlockingIOError:
            import select; select.select([child.stdout], [], []); continue
        if not chunk: break
        data += chunk
    os.waitpid(child.pid, 0)
    with open({str(out)!r}, "ab") as fh:
        fh.write(data + b"\\n")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    assert out.read_bytes() == b"payload-helper\npayload-subprocess\n"


def test_a_payload_bigger_than_the_pipe_is_written_in_part_and_stdin_left_open(
    each: Spawner,
) -> None:
    payload = b"x" * (4 * 1024 * 1024)
    child = each.spawn("/bin/cat", "/", {}, payload, -1)
    assert child.stdin is not None
    assert 0 < child.written < len(payload)
    os.close(child.stdin)
    child.stdin = None
    out, status = finish(child)
    assert status == 0
    assert out == payload[: child.written]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"A=B": "x"}, "illegal environment variable name"),
        ({"": "x"}, "illegal environment variable name"),
        ({"A": "x\0y"}, "embedded null byte"),
        ({"A\0B": "x"}, "embedded null byte"),
    ],
)
def test_a_bad_environment_is_refused_before_anything_starts(
    each: Spawner, env: dict[str, str], message: str
) -> None:
    before = open_fds_settled()
    with pytest.raises(ValueError, match=message):
        each.spawn("/bin/cat", "/", env, b"", -1)
    assert open_fds() == before


@pytest.mark.parametrize(("path", "cwd"), [("/bin/cat\0x", "/"), ("/bin/cat", "/\0tmp")])
def test_a_nul_byte_in_the_entry_or_the_folder_is_refused_before_anything_starts(
    each: Spawner, path: str, cwd: str
) -> None:
    before = open_fds_settled()
    with pytest.raises(ValueError, match="embedded null byte"):
        each.spawn(path, cwd, {}, b"", -1)
    assert open_fds() == before


def test_an_entry_that_cannot_be_executed_raises_oserror_and_leaves_nothing_open(
    each: Spawner, tmp_path: Path
) -> None:
    entry = write_executable(tmp_path / "not-a-program", b"\x7fELF garbage", mode=0o755)
    before = open_fds_settled()
    for path, cwd in ((str(entry), "/"), ("/nonexistent/program", "/"), ("/bin/cat", "/nope")):
        with pytest.raises(OSError) as raised:
            each.spawn(path, cwd, {}, b"{}", -1)
        assert raised.value.errno is not None
        assert raised.value.strerror
    assert open_fds() == before


@pytest.mark.parametrize(
    ("code", "expected"),
    [("exit 3", 3), ("kill -KILL $$", -9)],
    ids=["exit-status", "signal"],
)
def test_reaping_through_the_pidfd_gives_the_exit_code_in_popens_convention(
    code: str, expected: int
) -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", code])
    pidfd = os.pidfd_open(proc.pid)
    try:
        assert reap_by_pidfd(pidfd, proc.pid) == expected
        assert reap_by_pidfd(pidfd, proc.pid) is None  # reaped: nothing is left to take
    finally:
        os.close(pidfd)
        proc.returncode = expected  # reaped here: subprocess must not wait for it again


#: Refuses close_range (436 on x86_64 and aarch64) with EPERM, as container seccomp profiles
#: older than the call do, then spawns one child through the helper and prints its stdout.
CLOSE_RANGE_REFUSED = r"""
import ctypes, os, select, struct, sys
from ongrid_skills.execution.spawner import spawner

helper = spawner("helper")  # built and loaded before the filter goes on

def ins(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)

program = b"".join([
    ins(0x20, 0, 0, 0),               # load the system call's number
    ins(0x15, 0, 1, 436),             # close_range?
    ins(0x06, 0, 0, 0x00050000 | 1),  # then: fail it with EPERM
    ins(0x06, 0, 0, 0x7FFF0000),      # else: allow
])
buffer = ctypes.create_string_buffer(program)

class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

filter_ = Program(len(program) // 8, ctypes.addressof(buffer))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(filter_), 0, 0) == 0  # PR_SET_SECCOMP, filter
script = sys.argv[1]
child = helper.spawn(script, os.path.dirname(script), {}, b"{}", -1)
select.select([child.pidfd], [], [], 15)
print(os.read(child.stdout, 100).decode().strip())
"""


def test_a_seccomp_policy_refusing_close_range_does_not_stop_the_helper_spawning(
    tmp_path: Path,
) -> None:
    # The child's descriptors from 3 up are then closed one by one, as where the kernel has no
    # close_range: closing is harmless whatever made close_range fail.
    require_helper()
    assert platform.machine() in ("x86_64", "aarch64")  # the filter's system call number
    script = write_executable(tmp_path / "run.sh", "#!/bin/sh\necho '{\"ok\": true}'\n")
    done = subprocess.run(
        [sys.executable, "-c", CLOSE_RANGE_REFUSED, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == '{"ok": true}'
