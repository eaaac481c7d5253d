"""Children die with their manager: the group records and this process's sentinel (Linux).

The runner writes one slot per running call into a *group record* right after the spawn and
frees it right before reaping the call's main process: two memory stores into a shared mapping of
the record per call (no system call, no database transaction, nothing else). The record of a
manager with a data dir is a file, ``<data dir>/groups/<boot id>.<pid>.<start ticks>.groups``;
without one (the Python API, tests, benchmarks) it is an anonymous memory file. The format and
the careful killing are in :mod:`ongrid_skills.execution.sentinel`.

Two things read the records, and only once their manager is dead:

- the *sentinel*, one helper process per manager process, started on the first spawn, which
  learns of the manager's death by EOF on a pipe (:class:`Supervision`);
- start-up recovery (:func:`kill_left_behind`), for the rare case where the sentinel died too.

The sentinel stays in the manager's session (its own process group, so a terminal's Ctrl-C does
not reach it): the orphan sweeper (:mod:`ongrid_skills.execution.reaper`) leaves children of the
manager's own session alone. Not for other platforms: off Linux, supervision is off.

Why not ``PR_SET_PDEATHSIG``: it needs ``preexec_fn`` (which forces ``fork``, milliseconds per
call) or a helper exec'd before the entry (one more exec per call, as much as the call itself);
it fires when the spawning *thread* exits, not the process; and it reaches only the child, not
its grandchildren. The record costs two memory stores per call; the sentinel, nothing until the
end.

It must never block a call on the sentinel (a dead one is replaced, a missing one only logged),
and never let a forked child inherit the pipe (the sentinel would outlive the manager).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import logging
import mmap
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from ongrid_skills.execution import sentinel

LOG = logging.getLogger("ongrid_skills.runner")
SUPPORTED = sys.platform.startswith("linux")
SENTINEL_GRACE_SECONDS = 2.0  # the runner's KILL_GRACE_SECONDS
CHECK_SECONDS = 1.0  # how often a spawn checks that the sentinel is still there
SUFFIX = ".groups"
TICKS = os.sysconf("SC_CLK_TCK")  # the unit of start times in /proc/<pid>/stat


def groups_dir_of(data_dir: str) -> str:
    """Where the managers on ``data_dir`` keep their group records."""
    return os.path.join(data_dir, "groups")


class GroupRecord:
    """The slots of one record: which calls of this process are running. Thread-safe.

    Lean on purpose, it runs on every call: the file is mapped shared, so recording a call is
    two 8-byte stores into the page cache (no system call; a process reading the file sees them
    at once, and they outlive the writer's death), and each slot operation is one atomic call
    under the GIL (``list.pop``, ``next`` on a counter, ``list.append``): no lock but to grow.
    """

    def __init__(self, fd: int, path: str | None, owner: Supervision) -> None:
        self.fd = fd
        self.path = path
        self.owner = owner
        self.free: list[int] = []
        self.slots = itertools.count()
        self.lock = threading.Lock()
        self.maps: list[mmap.mmap] = []  # kept: a thread may still hold an older, smaller view
        self.base = 0  # the address of the newest map (the spawn helper clears slots there)
        self.words = self._map(mmap.PAGESIZE)

    def _map(self, size: int) -> memoryview:
        os.ftruncate(self.fd, size)
        mapped = mmap.mmap(self.fd, size)
        self.maps.append(mapped)  # never closed: the address below stays valid
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        return memoryview(mapped).cast("q")

    @property
    def known_children(self) -> tuple[int, ...]:
        """Children of this process that are not a call's leftovers (the sentinel)."""
        pid = self.owner.sentinel_pid
        return () if pid is None else (pid,)

    @property
    def live(self) -> int:
        """How many calls the record holds as running now (read back from the file)."""
        return len(sentinel.read_record_fd(self.fd))

    def add(self, sid: int) -> int:
        """Record a call whose main process (its session id) is ``sid``; returns its slot
        (-1 when the record cannot grow: the call runs unrecorded rather than not at all)."""
        owner = self.owner
        if time.monotonic() - owner.checked >= CHECK_SECONDS:
            owner.check()
        try:
            slot = self.free.pop()
        except IndexError:
            slot = next(self.slots)
        at = 2 * slot
        words = self.words if at < len(self.words) else self._grow(at)
        if words is None:
            self.free.append(slot)
            return -1
        words[at + 1] = int(time.clock_gettime(time.CLOCK_BOOTTIME) * TICKS) + 1
        words[at] = sid  # last: a non-zero id is what makes the slot live
        return slot

    def remove(self, slot: int) -> None:
        """The call in ``slot`` is over: its group was killed and its main process is not
        reaped yet (so its id could not have been reused)."""
        if slot >= 0:
            self.words[2 * slot] = 0
            self.free.append(slot)

    def address(self, slot: int) -> int | None:
        """Where ``slot``'s id lives in memory, for the spawn helper to clear it as
        :meth:`remove` would (then :meth:`released`); None for no slot."""
        return self.base + 16 * slot if slot >= 0 else None

    def released(self, slot: int) -> None:
        """The helper cleared ``slot`` (at :meth:`address`): it may be given out again."""
        if slot >= 0:
            self.free.append(slot)

    def _grow(self, at: int) -> memoryview | None:
        with self.lock:
            try:
                while at >= len(self.words):
                    self.words = self._map(2 * len(self.words) * 8)
            except (OSError, ValueError) as exc:
                LOG.warning("cannot grow the group record: %s", exc)
                return None
            return self.words


class Supervision:
    """This process's sentinel and the records it reads when the process dies."""

    def __init__(self, grace: float = SENTINEL_GRACE_SECONDS) -> None:
        self.grace = grace
        self.lock = threading.RLock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None
        self.anonymous: GroupRecord | None = None
        self.named: dict[str, GroupRecord] = {}
        self.checked = 0.0
        self.failed = False

    @property
    def sentinel_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def record(self, groups_dir: str | None) -> GroupRecord | None:
        """The record for calls of a manager with this groups dir (None: the anonymous one).

        Starts the sentinel on first use. A groups dir that cannot be written falls back to
        the anonymous record: the sentinel still protects those calls, recovery cannot. None
        when not even the anonymous record can be made (calls then run unsupervised)."""
        with self.lock:
            if self.anonymous is None:
                self.anonymous = _opened(_anonymous_fd, None, self)
                if self.anonymous is None:
                    self._failed("no memory file for the record")
                    return None
                self._start()
            if groups_dir is None:
                return self.anonymous
            path = record_path(groups_dir)
            found = self.named.get(path)
            if found is None:
                found = _opened(functools.partial(_create_record, path), path, self)
                if found is None:
                    return self.anonymous
                self.named[path] = found
                self._send(_named(path))
            return found

    def check(self) -> None:
        """Replace a sentinel that was killed (called at most once a second, on a spawn)."""
        self.checked = time.monotonic()
        proc = self.proc
        if proc is not None and proc.poll() is not None:
            with self.lock:
                if self.proc is not proc:
                    return
                if proc.returncode >= 0:  # it failed on its own: it cannot run here, do not loop
                    self._failed(f"it exited with status {proc.returncode}")
                    self.proc = None
                    return
                LOG.warning(
                    "the sentinel was killed (signal %d); starting another", -proc.returncode
                )
                self._start()

    def _start(self) -> None:
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        assert self.anonymous is not None
        fd = self.anonymous.fd
        if not sys.executable or not os.path.isfile(sentinel.__file__):
            self._failed("no interpreter or no sentinel.py to run")
            return
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", sentinel.__file__, str(self.grace), str(fd)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(fd,),
                process_group=0,
                cwd="/",
                env={},
            )
        except (OSError, ValueError) as exc:
            os.close(write_end)
            self.proc = None
            self._failed(str(exc))
            return
        finally:
            os.close(read_end)
        self.pipe = write_end
        for path in self.named:
            self._send(_named(path))

    def _failed(self, why: str) -> None:
        if not self.failed:
            LOG.warning(
                "cannot run the sentinel (%s): skills will outlive a killed manager until"
                " start-up recovery",
                why,
            )
        self.failed = True

    def _send(self, line: bytes) -> None:
        if self.pipe is None:
            return
        try:
            os.write(self.pipe, line)
        except OSError:  # the sentinel is gone; check() replaces it
            self.checked = 0.0

    def forget(self) -> None:
        """In a forked child: drop the parent's pipe and records without touching them."""
        for record in (self.anonymous, *self.named.values()):
            if record is not None:
                with contextlib.suppress(OSError):
                    os.close(record.fd)
                record.fd = -1  # a runner holding it asks for this process's own record
        if self.pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self.pipe)
        self.pipe = None
        self.proc = None
        self.anonymous = None
        self.named = {}


class _ThisProcess:
    """The one supervision of this process (a class, not a global: forks replace it)."""

    lock = threading.Lock()
    current: Supervision | None = None
    fork_hooked = False


def supervision() -> Supervision:
    """This process's supervision, created on first use (a forked child gets its own)."""
    with _ThisProcess.lock:
        if _ThisProcess.current is None:
            if not _ThisProcess.fork_hooked:
                os.register_at_fork(after_in_child=_after_fork)
                _ThisProcess.fork_hooked = True
            _ThisProcess.current = Supervision()
        return _ThisProcess.current


def _after_fork() -> None:
    if _ThisProcess.current is not None:
        _ThisProcess.current.forget()
    _ThisProcess.current = None
    _ThisProcess.lock = threading.Lock()  # the parent may have held it at the fork


def _opened(create: Callable[[], int], path: str | None, owner: Supervision) -> GroupRecord | None:
    fd = -1
    try:
        fd = create()
        return GroupRecord(fd, path, owner)
    except (OSError, ValueError) as exc:
        LOG.warning("cannot keep a group record %s: %s", path or "in memory", exc)
        if fd >= 0:
            os.close(fd)
        return None


def _anonymous_fd() -> int:
    if hasattr(os, "memfd_create"):
        return os.memfd_create("ongrid-skills-groups")
    fd, path = tempfile.mkstemp(prefix="ongrid-skills-groups-")  # pragma: no cover
    os.unlink(path)  # pragma: no cover
    return fd  # pragma: no cover


def _named(path: str) -> bytes:
    return b"L" + os.fsencode(path).hex().encode() + b"\n"


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "unknown"


def record_path(groups_dir: str) -> str:
    """This process's record in ``groups_dir``: named by boot, pid and start time, so that
    recovery can tell whether its writer is still alive."""
    info = sentinel.proc_stat("self")
    start = info[3] if info is not None else 0
    name = f"{boot_id()}.{os.getpid()}.{start}{SUFFIX}"
    return os.path.join(os.path.abspath(groups_dir), name)


def _create_record(path: str) -> int:
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, 0o600)


def kill_left_behind(groups_dir: str, grace: float = SENTINEL_GRACE_SECONDS) -> int:
    """Start-up recovery: kill the calls recorded by dead managers; how many were alive.

    Records of a manager process that still runs (another door on the same data dir, or this
    process) are left alone; records of an earlier boot are only removed. Blocks up to
    ``grace`` seconds when a recorded call ignores SIGTERM.
    """
    if not SUPPORTED:
        return 0
    try:
        names = os.listdir(groups_dir)
    except OSError:
        return 0
    boot = boot_id()
    records: list[sentinel.Recorded] = []
    done: list[str] = []
    for name in names:
        parts = name[: -len(SUFFIX)].split(".") if name.endswith(SUFFIX) else []
        if len(parts) != 3 or not (parts[1].isdigit() and parts[2].isdigit()):
            continue
        path = os.path.join(groups_dir, name)
        if parts[0] == boot:
            if _running(int(parts[1]), int(parts[2])):
                continue
            records += sentinel.read_record(path)
        done.append(path)
    killed = sentinel.kill_recorded(records, grace) if records else 0
    for path in done:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return killed


def _running(pid: int, start: int) -> bool:
    info = sentinel.proc_stat(pid)
    return info is not None and info[0] not in ("Z", "X") and info[3] == start
