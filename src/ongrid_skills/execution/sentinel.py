"""The sentinel: a helper process that kills what a dead manager leaves running (Linux).

This file is two things. Run as a program (``python -I -S sentinel.py GRACE FD``), it is the
sentinel that :mod:`ongrid_skills.execution.supervision` starts once per manager process: it
blocks on its stdin, a pipe whose only writer is the manager. However the manager dies (``kill -9``
included), the kernel closes that pipe; the sentinel reads EOF, reads the *group records* (the
inherited anonymous one, fd ``FD``, and the files in data dirs the manager named on the pipe),
kills every recorded session still alive (SIGTERM, then SIGKILL after ``GRACE`` seconds), removes
the named records and exits. It costs the manager nothing per call: it sleeps until the end.

Imported as a module, it is the record format and the careful killing that start-up recovery
shares with the sentinel:

- A *record* is a file of 16-byte slots, two native 64-bit integers: ``sid`` (0: a free slot),
  then ``ticks``. ``sid`` is the call's main pid, which is also its process group and session id
  (the runner starts each child in a new session); ``ticks`` is the boot clock
  (``CLOCK_BOOTTIME``, in the clock ticks of ``/proc/<pid>/stat``), rounded up, read after the
  spawn: the main process started at or before it. The writer maps the file and stores
  ``ticks`` before ``sid`` (binary, because formatting text on every call costs more than the
  rest of the record). Records are read on the host that wrote them, hence native byte order.
- Pid numbers come back. A recorded session is killed only when one of its processes started no
  later than its ``ticks`` (for the sentinel: no later than the manager's death, see
  :func:`kill_recorded`): a session that reuses the number began after the recorded one ended,
  so all its processes are younger. Once proven, a session keeps its number for as long as it
  has members (a session or group id is never handed out while in use; pids are allocated
  cyclically, so a number does not come back within milliseconds), so the grace-period polls
  only check that it still has members.

It must never import ongrid_skills (it runs without the package on its path), never signal a
process it cannot attribute to a record, and never outlive the kill of what it found.
"""

from __future__ import annotations

import array
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

SLOT = 16  # bytes: two "q" words, sid then ticks
POLL_SECONDS = 0.02
_AFTER_KILL_SECONDS = 1.0  # SIGKILL again whatever a member forked between two scans
_TICKS = os.sysconf("SC_CLK_TCK")


# Plain classes, no dataclasses or contextlib: the sentinel's memory is the interpreter's own.
class Recorded:
    """One live call's session as recorded: its id and the boot-clock ticks after its spawn."""

    __slots__ = ("sid", "ticks")

    def __init__(self, sid: int, ticks: int) -> None:
        self.sid = sid
        self.ticks = ticks


class Member:
    """A process of a recorded session, from /proc."""

    __slots__ = ("pgrp", "pid", "start", "zombie")

    def __init__(self, pid: int, pgrp: int, start: int, zombie: bool) -> None:
        self.pid = pid
        self.pgrp = pgrp
        self.start = start
        self.zombie = zombie


def boot_ticks() -> int:
    """Now on the clock of ``/proc/<pid>/stat`` start times, rounded up to the next tick."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS) + 1


def encode_slots(slots: Iterable[tuple[int, int]]) -> bytes:
    """The bytes of a record holding these ``(sid, ticks)`` slots."""
    return array.array("q", [word for slot in slots for word in slot]).tobytes()


def slot_words(data: bytes) -> list[tuple[int, int]]:
    """Every slot of a record's bytes as ``(sid, ticks)``, free ones included."""
    words = array.array("q")
    words.frombytes(data[: len(data) - len(data) % SLOT])
    return list(zip(words[::2], words[1::2], strict=True))


def parse_record(data: bytes) -> list[Recorded]:
    """The live sessions in a record's bytes (free or damaged slots are skipped)."""
    return [Recorded(sid, ticks) for sid, ticks in slot_words(data) if sid > 1 and ticks > 0]


def read_record_fd(fd: int) -> list[Recorded]:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 16, offset)
        if not chunk:
            return parse_record(b"".join(chunks))
        chunks.append(chunk)
        offset += len(chunk)


def read_record(path: str) -> list[Recorded]:
    """The live sessions of the record at ``path`` (none when it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        return read_record_fd(fd)
    finally:
        os.close(fd)


def proc_stat(pid: int | str) -> tuple[str, int, int, int] | None:
    """(state, process group, session, start ticks) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state; pgrp is field 5, session 6, starttime 22.
    return fields[0].decode(), int(fields[2]), int(fields[3]), int(fields[19])


def sessions(wanted: set[int]) -> dict[int, list[Member]]:
    """The processes of each wanted session, from one pass over /proc."""
    found: dict[int, list[Member]] = {}
    if not wanted:
        return found
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        info = proc_stat(name)
        if info is not None and info[2] in wanted:
            member = Member(int(name), info[1], info[3], info[0] in ("Z", "X"))
            found.setdefault(info[2], []).append(member)
    return found


def _living(members: Iterable[Member]) -> list[Member]:
    return [m for m in members if not m.zombie]


def _signal(sid: int, members: list[Member], sig: signal.Signals) -> None:
    # The call's own group in one atomic killpg (it also reaches what forks meanwhile); the
    # session's other groups (a skill with job control) member by member.
    _kill(os.killpg, sid, sig)
    for member in members:
        if member.pgrp != sid:
            _kill(os.kill, member.pid, sig)


def _kill(how: Callable[[int, int], None], target: int, sig: signal.Signals) -> None:
    try:
        how(target, sig)
    except (ProcessLookupError, PermissionError):
        return


def _still_living(left: dict[int, list[Member]]) -> dict[int, list[Member]]:
    """After a short pause, the sessions of ``left`` that still have a living member."""
    time.sleep(POLL_SECONDS)
    table = sessions(set(left))
    return {sid: alive for sid in left if (alive := _living(table.get(sid, ())))}


def kill_recorded(records: Iterable[Recorded], grace: float, died_at: int = 0) -> int:
    """Kill the recorded sessions that are still the ones recorded; how many were alive.

    SIGTERM first; SIGKILL to what is left after ``grace`` seconds (earlier when all are gone).
    ``died_at``: when the sentinel saw its manager die (boot ticks). A session's number stays
    taken until the manager's death frees its unreaped main process, so a process of the session
    that started before that moment is the call's too (a child forked after the spawn, while the
    main process is already a zombie re-parented and reaped): recovery, long after, cannot say so.
    """
    newest: dict[int, int] = {}
    for rec in records:
        newest[rec.sid] = max(rec.ticks, died_at, newest.get(rec.sid, 0))
    table = sessions(set(newest))
    proven = {
        sid: members
        for sid, members in table.items()
        if _living(members) and any(m.start <= newest[sid] for m in members)
    }
    for sid, members in proven.items():
        _signal(sid, members, signal.SIGTERM)
    left = {sid: _living(members) for sid, members in proven.items()}
    deadline = time.monotonic() + grace
    while left and time.monotonic() < deadline:
        left = _still_living(left)
    deadline = time.monotonic() + _AFTER_KILL_SECONDS
    while left:
        for sid, members in left.items():
            _signal(sid, members, signal.SIGKILL)
        if time.monotonic() >= deadline:
            break
        left = _still_living(left)
    return len(proven)


def _read_commands(paths: list[str]) -> None:
    """Block on stdin until EOF; ``L<hex path>`` lines name record files in data dirs."""
    pending = b""
    while True:
        chunk = os.read(0, 4096)
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"L"):
                try:
                    paths.append(os.fsdecode(bytes.fromhex(line[1:].decode("ascii"))))
                except ValueError:
                    continue


def main(argv: list[str]) -> int:
    # Not for terminal signals: only the end of the manager ends the sentinel.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    grace = float(argv[1])
    anonymous = int(argv[2])
    paths: list[str] = []
    _read_commands(paths)
    died_at = boot_ticks()
    records = read_record_fd(anonymous)
    for path in paths:
        records += read_record(path)
    kill_recorded(records, grace, died_at)
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            continue
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
