"""The escape zoo (SPEC §20): each attack a skill could try, run for real twice, unconfined and
under a profile. Every test first shows that the attack works here without a sandbox (so the
test can fail), then that the profile stops it. The tests run as root here and in CI, which is
what makes reading /etc/shadow or another process's environment possible without a sandbox.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.landlock import abi
from ongrid_skills.execution.records import Status
from ongrid_skills.execution.runner import RunOutcome, SpawnSpec, SubprocessRunner
from ongrid_skills.skills.sandbox import SandboxSpec
from tests.support.runner import (
    PYTHON,
    canonical_dir,
    compile_c,
    require_helper,
    run_call,
    spec_for,
    write_executable,
)

pytestmark = pytest.mark.skipif(abi() < 4, reason="needs Landlock ABI 4 (files and TCP)")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manager's data dir with its audit key, as the policy protects it."""
    folder = canonical_dir(tmp_path_factory.mktemp("data"))
    (folder / "audit.key").write_text("the-audit-key\n")
    (folder / "audit.key").chmod(0o600)
    return folder


@pytest.fixture(scope="module")
def runner(data_dir: Path) -> Iterator[SubprocessRunner]:
    require_helper()
    policy = SandboxPolicy(protected=(str(data_dir),), memory_mb=256, processes=301)
    found = SubprocessRunner(sandbox=policy, kill_grace=0.5, linger=0.2)
    yield found
    found.close()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP port on loopback that accepts (and counts) connections."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server
    stop.set()
    thread.join()
    server.close()


def skill(tmp_path: Path, body: str, name: str = "run") -> SpawnSpec:
    root = canonical_dir(tmp_path / "skills")
    entry = write_executable(root / "skill" / name, body)
    return spec_for(root, entry, env={"PATH": "/usr/bin:/bin"})


#: The interpreter of the Python skills here lives outside the system folders: they declare it.
INTERPRETER = (os.path.realpath(sys.base_prefix),)


def run(
    runner: SubprocessRunner, spec: SpawnSpec, profile: str | None, **declared: Any
) -> RunOutcome:
    """One call of ``spec`` unconfined (None) or under ``profile`` with ``declared`` fields
    (plus a read of the Python interpreter's folder)."""
    read = (*declared.pop("read", ()), *INTERPRETER)
    sandbox = None if profile is None else SandboxSpec(profile, read=read, **declared)
    confined = SpawnSpec(**{**_fields(spec), "sandbox": sandbox})
    return run_call(runner, confined).outcome


def _fields(spec: SpawnSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in SpawnSpec.__dataclass_fields__}


def answer(outcome: RunOutcome) -> Any:
    assert outcome.status is Status.SUCCEEDED, (outcome.error, outcome.stderr_tail)
    return outcome.result


READ = """#!/bin/sh
if cat "$1" >/dev/null 2>&1; then echo '"read"'; else echo '"denied"'; fi
"""


def reader(tmp_path: Path, target: str | Path) -> SpawnSpec:
    return skill(tmp_path, READ.replace('"$1"', f"'{target}'"))


# ---- files -----------------------------------------------------------------------------------


def test_a_confined_call_cannot_write_outside_its_temp_dir_and_declared_paths(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    outside = canonical_dir(tmp_path / "outside")
    allowed = canonical_dir(tmp_path / "allowed")
    spec = skill(
        tmp_path,
        f"""#!/bin/sh
w() {{
  if echo x > "$1" 2>/dev/null; then printf '"%s":true,' "$2"; else printf '"%s":false,' "$2"; fi
}}
printf '{{'; w {outside}/file outside; w {allowed}/file declared; w "$TMPDIR/file" temp
echo '"end":0}}'
""",
    )
    assert answer(run(runner, spec, None))["outside"] is True  # the attack works unconfined
    (outside / "file").unlink()
    for profile in ("strict", "host-read"):
        got = answer(run(runner, spec, profile, write=(str(allowed),)))
        assert got == {"outside": False, "declared": True, "temp": True, "end": 0}, profile
        assert not (outside / "file").exists()


@pytest.mark.parametrize("profile", ["strict", "host-read"])
def test_a_confined_call_cannot_read_the_data_dir_the_audit_key_or_etc_shadow(
    runner: SubprocessRunner, tmp_path: Path, data_dir: Path, profile: str
) -> None:
    targets = [data_dir / "audit.key", "/etc/shadow"]
    for target in targets:
        spec = reader(tmp_path, target)
        assert answer(run(runner, spec, None)) == "read", target  # root reads it unconfined
        assert answer(run(runner, spec, profile)) == "denied", (profile, target)
    listing = skill(tmp_path, f"#!/bin/sh\ncat {data_dir}/* >/dev/null 2>&1 && echo 1 || echo 0\n")
    assert answer(run(runner, listing, profile)) == 0


def test_host_read_reads_the_host_but_strict_only_its_own_folder(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("hello")
    spec = reader(tmp_path, elsewhere)
    assert answer(run(runner, spec, "host-read")) == "read"
    assert answer(run(runner, spec, "strict")) == "denied"
    assert answer(run(runner, spec, "strict", read=(str(elsewhere),))) == "read"


def test_a_symlink_planted_after_the_checks_does_not_lead_out(
    runner: SubprocessRunner, tmp_path: Path, data_dir: Path
) -> None:
    shared = canonical_dir(tmp_path / "shared")
    (shared / "report.txt").write_text("fine")
    spec = reader(tmp_path, shared / "report.txt")
    assert answer(run(runner, spec, "strict", read=(str(shared),))) == "read"
    # Planted once the skill was loaded and its paths checked: the same name now leads out.
    (shared / "report.txt").unlink()
    (shared / "report.txt").symlink_to(data_dir / "audit.key")
    assert answer(run(runner, spec, None)) == "read"
    assert answer(run(runner, spec, "strict", read=(str(shared),))) == "denied"
    (shared / "report.txt").unlink()
    (shared / "report.txt").symlink_to("/etc/shadow")
    assert answer(run(runner, spec, "host-read")) == "denied"


# ---- network ---------------------------------------------------------------------------------

CONNECT = f"""#!{PYTHON} -S
import socket, sys
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    print('"connected"')
except OSError as exc:
    print('"refused"')
"""


def test_network_false_refuses_a_connect_to_a_loopback_port(
    runner: SubprocessRunner, tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    spec = skill(tmp_path, CONNECT.replace("PORT", str(port)))
    assert answer(run(runner, spec, None)) == "connected"
    assert answer(run(runner, spec, "strict")) == "refused"
    assert answer(run(runner, spec, "host-read")) == "refused"
    assert answer(run(runner, spec, "strict", network=True)) == "connected"


def test_bash_cannot_write_to_dev_tcp_without_network(
    runner: SubprocessRunner, tmp_path: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    spec = skill(
        tmp_path,
        f"#!/bin/bash\nif echo hi > /dev/tcp/127.0.0.1/{port}; then echo 1; else echo 0; fi\n",
    )
    assert answer(run(runner, spec, None)) == 1
    assert answer(run(runner, spec, "strict")) == 0


# ---- resources -------------------------------------------------------------------------------

FORK_BOMB = f"""#!{PYTHON} -S
import os, signal
started = 0
for _ in range(400):
    try:
        if os.fork() == 0:
            signal.pause()
            os._exit(0)
    except OSError:
        break
    started += 1
print(started)
"""


def test_a_fork_bomb_is_bounded_by_the_process_limit(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    spec = skill(tmp_path, FORK_BOMB)
    assert answer(run(runner, spec, None)) == 400
    assert answer(run(runner, spec, "strict")) < 301


MEMORY = f"""#!{PYTHON} -S
import mmap
try:
    mmap.mmap(-1, 1 << 30)  # 1 GiB of address space, never touched
    print('"mapped"')
except OSError:
    print('"refused"')
"""


def test_a_call_cannot_take_more_address_space_than_the_limit(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    spec = skill(tmp_path, MEMORY)
    assert answer(run(runner, spec, None)) == "mapped"
    assert answer(run(runner, spec, "strict")) == "refused"


# ---- other processes -------------------------------------------------------------------------


def test_the_managers_environment_cannot_be_read_through_proc(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    spec = reader(tmp_path, f"/proc/{os.getpid()}/environ")
    assert answer(run(runner, spec, None)) == "read"
    assert answer(run(runner, spec, "host-read")) == "denied"
    assert answer(run(runner, spec, "strict")) == "denied"


PTRACE = f"""#!{PYTHON} -S
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
# PTRACE_SEIZE does not stop the process; exiting detaches.
print('"attached"' if libc.ptrace(0x4206, VICTIM, None, None) == 0 else '"refused"')
"""


def test_a_confined_call_cannot_ptrace_a_process_outside_it(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    victim = subprocess.Popen(["sleep", "30"])
    try:
        spec = skill(tmp_path, PTRACE.replace("VICTIM", str(victim.pid)))
        assert answer(run(runner, spec, None)) == "attached"
        assert answer(run(runner, spec, "host-read")) == "refused"
    finally:
        victim.kill()
        victim.wait()


SETUID = r"""
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("%d\n", (int)geteuid()); return 0; }
"""


def test_a_setuid_binary_does_not_change_the_calls_ids(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    root = canonical_dir(tmp_path / "skills")
    entry = compile_c(SETUID, root / "skill" / "run")
    os.chown(entry, 65534, 65534)
    entry.chmod(0o4755)  # set-user-ID nobody: exec changes the caller's effective id
    spec = spec_for(root, entry)
    assert answer(run(runner, spec, None)) == 65534
    assert answer(run(runner, spec, "strict")) == os.geteuid()


CHOWN = """#!/bin/sh
touch "$TMPDIR/f" && if chown 65534 "$TMPDIR/f" 2>/dev/null; then echo 1; else echo 0; fi
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="capabilities are root's")
def test_a_root_managers_confined_call_runs_without_capabilities(
    runner: SubprocessRunner, tmp_path: Path
) -> None:
    spec = skill(tmp_path, CHOWN.replace('"$TMPDIR/f"', "$TMPDIR/f"))
    unconfined = SpawnSpec(**{**_fields(spec), "env": {**spec.env, "TMPDIR": str(tmp_path)}})
    assert answer(run(runner, unconfined, None)) == 1  # CAP_CHOWN
    assert answer(run(runner, spec, "strict")) == 0
