"""``list_processes``: the host's processes, read straight from ``/proc`` (Linux).

No psutil and no ``ps`` subprocess: per process, ``/proc/<pid>/stat`` (state, parent, CPU time,
start time, resident memory), ``status`` (effective uid) and ``cmdline``. A process that exits
while the table is being read is simply left out. Read-only: nothing is signalled or traced.

Command lines are shown with secrets redacted (``--token ogs_…``, ``password=…``: see
:mod:`ongrid_skills.builtins.redact`), and ``name_contains`` matches the redacted text only, so
a search cannot guess a secret character by character.
"""

from __future__ import annotations

import asyncio
import os
import pwd
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.redact import redact

__all__ = ["list_processes"]

PROC = "/proc"
MAX_LIMIT = 5000
CMDLINE_CHARS = 512
_CMDLINE_READ = 8192  # bytes of /proc/<pid>/cmdline read at most

SortKey = Literal["rss", "cpu", "pid"]


def _read(path: str, limit: int = 65536) -> bytes:
    with open(path, "rb") as fh:  # buffered: read(limit) loops until limit or EOF
        return fh.read(limit)


def _boot_time() -> float:
    try:
        for line in _read(f"{PROC}/stat", 1 << 20).decode("ascii", "replace").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _user_name(uid: int, cache: dict[int, str]) -> str:
    name = cache.get(uid)
    if name is None:
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            name = str(uid)
        cache[uid] = name
    return name


def _effective_uid(pid: str) -> int | None:
    try:
        status = _read(f"{PROC}/{pid}/status").decode("utf-8", "replace")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            if len(parts) >= 3:
                return int(parts[2])
    return None


def _process(
    pid: str, clk_tck: int, page_size: int, boot: float, users: dict[int, str]
) -> dict[str, Any] | None:
    """One process's record, or None when it vanished or cannot be read."""
    try:
        raw = _read(f"{PROC}/{pid}/stat").decode("utf-8", "replace")
        # "pid (comm) state ppid ..." — comm may hold spaces and parentheses: split on the last ')'.
        open_paren, close_paren = raw.index("("), raw.rindex(")")
        name = raw[open_paren + 1 : close_paren]
        fields = raw[close_paren + 2 :].split()
        state, ppid = fields[0], int(fields[1])
        utime, stime = int(fields[11]), int(fields[12])
        start_ticks, rss_pages = int(fields[19]), int(fields[21])
        cmdline_raw = _read(f"{PROC}/{pid}/cmdline", _CMDLINE_READ)
    except (OSError, ValueError, IndexError):
        return None
    uid = _effective_uid(pid)
    if uid is None:
        try:
            uid = os.stat(f"{PROC}/{pid}").st_uid
        except OSError:
            return None
    cmdline = redact(cmdline_raw.rstrip(b"\x00").replace(b"\x00", b" ").decode("utf-8", "replace"))
    if len(cmdline) > CMDLINE_CHARS:
        cmdline = cmdline[: CMDLINE_CHARS - 1] + "…"
    start = boot + start_ticks / clk_tck
    return {
        "pid": int(pid),
        "ppid": ppid,
        "user": _user_name(uid, users),
        "uid": uid,
        "state": state,
        "name": name,
        "cmdline": cmdline,
        "rss_bytes": max(rss_pages, 0) * page_size,
        "cpu_seconds": round((utime + stime) / clk_tck, 2),
        "start_time": datetime.fromtimestamp(start, UTC).isoformat() if boot else None,
    }


def _matches_user(proc: dict[str, Any], user: str) -> bool:
    return proc["user"] == user or (user.isdigit() and proc["uid"] == int(user))


def _list(
    name_contains: str | None, user: str | None, limit: int, sort_by: SortKey
) -> dict[str, Any]:
    if not os.path.isfile(f"{PROC}/self/stat"):
        raise BuiltinFailure("list_processes needs a Linux /proc file system")
    clk_tck = os.sysconf("SC_CLK_TCK") or 100
    page_size = os.sysconf("SC_PAGE_SIZE") or 4096
    boot = _boot_time()
    users: dict[int, str] = {}
    needle = name_contains.lower() if name_contains else None
    try:
        pids = [entry for entry in os.listdir(PROC) if entry.isdigit()]
    except OSError as exc:
        raise BuiltinFailure(f"cannot list {PROC}: {exc.strerror or exc}") from None
    found: list[dict[str, Any]] = []
    for pid in pids:
        proc = _process(pid, clk_tck, page_size, boot, users)
        if proc is None:
            continue
        if needle and needle not in proc["name"].lower() and needle not in proc["cmdline"].lower():
            continue
        if user and not _matches_user(proc, user):
            continue
        found.append(proc)
    if sort_by == "pid":
        found.sort(key=lambda p: p["pid"])
    elif sort_by == "cpu":
        found.sort(key=lambda p: (-p["cpu_seconds"], p["pid"]))
    else:
        found.sort(key=lambda p: (-p["rss_bytes"], p["pid"]))
    shown = found[:limit]
    return {
        "processes": shown,
        "count": len(shown),
        "total": len(found),
        "truncated": len(found) > limit,
        "sort_by": sort_by,
    }


async def list_processes(
    ctx: BuiltinContext,
    name_contains: Annotated[
        str | None,
        Field(
            description="Keep processes whose name or command line contains this text "
            "(case-insensitive).",
            min_length=1,
            max_length=256,
        ),
    ] = None,
    user: Annotated[
        str | None,
        Field(
            description="Keep processes of this user (name or numeric uid).",
            min_length=1,
            max_length=64,
        ),
    ] = None,
    limit: Annotated[int, Field(description="Most processes to return.", ge=1, le=MAX_LIMIT)] = 200,
    sort_by: Annotated[
        SortKey,
        Field(description="rss / cpu: largest first; pid: ascending."),
    ] = "rss",
) -> dict[str, Any]:
    """Processes with pid, parent, user, state, name, command line, memory and CPU time."""
    if not 1 <= limit <= MAX_LIMIT:
        raise BuiltinFailure(f"limit must be within 1..{MAX_LIMIT}")
    if sort_by not in ("rss", "cpu", "pid"):
        raise BuiltinFailure(f"sort_by {sort_by!r} is not one of rss, cpu, pid")
    return await asyncio.to_thread(_list, name_contains or None, user or None, limit, sort_by)
