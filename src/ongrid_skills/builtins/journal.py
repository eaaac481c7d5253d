"""``read_journal``: recent systemd journal entries, through ``journalctl``.

``journalctl`` is found on the manager's ``PATH`` and run directly (no shell) with an environment
holding only that ``PATH``, in its own session, with stdin closed and a wall-clock limit (the
whole process group is killed past it). Every value passed to it is validated strictly and given
in the ``--option=value`` form, and a value starting with ``-`` is refused, so no argument can be
taken for an option.

Output is read line by line as it comes: each JSON entry is reduced at once to
``{ts, unit, identifier, priority, message, pid, host}`` (messages cut at
:data:`MAX_MESSAGE_CHARS`) and only the newest ``lines`` are kept, so memory stays bounded
whatever the journal holds. Past :data:`MAX_STDOUT_BYTES` of output the reading stops
(``truncated: true``). Messages are shown with secrets redacted (tokens, ``password=…``,
``Authorization:`` values: see :mod:`ongrid_skills.builtins.redact`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.processes import started_here
from ongrid_skills.builtins.redact import redact

__all__ = ["read_journal"]

MAX_LINES = 10000
MAX_MESSAGE_CHARS = 4096
MAX_STDOUT_BYTES = 64 * 1024 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024
STDERR_TAIL_BYTES = 4096
MAX_STDERR_LOG_LINES = 20

Priority = Literal["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"]
PRIORITIES: tuple[str, ...] = (
    "emerg",
    "alert",
    "crit",
    "err",
    "warning",
    "notice",
    "info",
    "debug",
)

#: systemd unit names (with escapes such as ``\x2d``, templates ``a@b``, and ``*`` globs).
UNIT_PATTERN = r"^[A-Za-z0-9_.@:\\*][A-Za-z0-9_.@:\\*-]{0,255}$"
#: journalctl time specs: "2024-05-01 10:00:00", "today", "1h ago", "@1714550400"…
SINCE_PATTERN = r"^[A-Za-z0-9@][A-Za-z0-9 :.+@_-]{0,63}$"
_UNIT_RE = re.compile(UNIT_PATTERN)
_SINCE_RE = re.compile(SINCE_PATTERN)


def _check_option_value(what: str, value: str, pattern: re.Pattern[str]) -> str:
    if value.startswith("-"):
        raise BuiltinFailure(f"{what} must not start with '-': {value!r}")
    if not pattern.fullmatch(value):
        raise BuiltinFailure(f"invalid {what} {value!r}")
    return value


def _text(value: Any) -> str | None:
    """A journal field as text: JSON string, or array of bytes for non-UTF-8 data."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if all(isinstance(b, int) and 0 <= b <= 255 for b in value):
            return bytes(value).decode("utf-8", errors="replace")
        # A field present several times: the values joined.
        parts = [_text(v) for v in value]
        return " ".join(p for p in parts if p)
    return str(value)


def _entry(record: dict[str, Any]) -> dict[str, Any]:
    ts: str | None = None
    realtime = _text(record.get("__REALTIME_TIMESTAMP"))
    if realtime and realtime.isdigit():
        micros = int(realtime)
        ts = (
            datetime.fromtimestamp(micros // 1_000_000, UTC)
            .replace(microsecond=micros % 1_000_000)
            .isoformat()
        )
    priority_text = _text(record.get("PRIORITY"))
    priority = int(priority_text) if priority_text and priority_text.isdigit() else None
    message = redact(_text(record.get("MESSAGE")) or "")
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    pid_text = _text(record.get("_PID"))
    return {
        "ts": ts,
        "unit": _text(record.get("_SYSTEMD_UNIT"))
        or _text(record.get("UNIT"))
        or _text(record.get("_SYSTEMD_USER_UNIT")),
        "identifier": _text(record.get("SYSLOG_IDENTIFIER")) or _text(record.get("_COMM")),
        "priority": priority,
        "priority_name": PRIORITIES[priority] if priority is not None and priority < 8 else None,
        "message": message,
        "pid": int(pid_text) if pid_text and pid_text.isdigit() else None,
        "host": _text(record.get("_HOSTNAME")),
    }


REAP_SECONDS = 5.0  # how long the killed journalctl is waited for at most


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


async def read_journal(
    ctx: BuiltinContext,
    unit: Annotated[
        str | None,
        Field(
            description="Only entries of this systemd unit (e.g. nginx.service; * globs allowed).",
            pattern=UNIT_PATTERN,
            max_length=256,
        ),
    ] = None,
    since: Annotated[
        str | None,
        Field(
            description="Only entries at or after this time, in journalctl syntax: "
            "'2024-05-01 10:00:00', 'today', 'yesterday', '1h ago', '@<unix seconds>'.",
            pattern=SINCE_PATTERN,
            max_length=64,
        ),
    ] = None,
    lines: Annotated[
        int, Field(description="How many of the newest entries to return.", ge=1, le=MAX_LINES)
    ] = 100,
    priority: Annotated[
        Priority | None,
        Field(description="Only entries of this priority or more severe."),
    ] = None,
    timeout_ms: Annotated[
        int, Field(description="Wall-clock limit for journalctl, in ms.", ge=100, le=120000)
    ] = 15000,
) -> dict[str, Any]:
    """The newest ``lines`` journal entries, optionally by unit, start time and priority."""
    if not 1 <= lines <= MAX_LINES:
        raise BuiltinFailure(f"lines must be within 1..{MAX_LINES}")
    if not 100 <= timeout_ms <= 120000:
        raise BuiltinFailure("timeout_ms must be within 100..120000")
    args = ["--no-pager", "--output=json", f"--lines={lines}"]
    if unit is not None:
        args.append(f"--unit={_check_option_value('unit', unit, _UNIT_RE)}")
    if since is not None:
        args.append(f"--since={_check_option_value('since', since, _SINCE_RE)}")
    if priority is not None:
        if priority not in PRIORITIES:
            raise BuiltinFailure(f"priority must be one of {', '.join(PRIORITIES)}")
        args.append(f"--priority={priority}")

    search_path = os.environ.get("PATH") or os.defpath
    journalctl = shutil.which("journalctl", path=search_path)
    if journalctl is None:
        raise BuiltinFailure("journalctl is not available on this host (not found on PATH)")

    # Listed as the built-ins' own while it runs: the orphan sweep after a skill call must not
    # take it for a skill's daemon (it runs in a session of its own).
    with started_here() as name:
        return await _read_journalctl(ctx, journalctl, args, search_path, lines, timeout_ms, name)


async def _read_journalctl(
    ctx: BuiltinContext,
    journalctl: str,
    args: list[str],
    search_path: str,
    lines: int,
    timeout_ms: int,
    name: Callable[[int], None],
) -> dict[str, Any]:
    """Run ``journalctl ARGS`` and read its entries (``name`` gets its pid once started)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            journalctl,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": search_path},
            start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
    except OSError as exc:
        raise BuiltinFailure(f"cannot run journalctl: {exc.strerror or exc}") from None
    name(proc.pid)

    entries: deque[dict[str, Any]] = deque(maxlen=lines)
    skipped = 0
    truncated = False
    stderr_tail = bytearray()
    stderr_logged = 0

    async def read_stdout() -> None:
        nonlocal skipped, truncated
        assert proc.stdout is not None
        total = 0
        while True:
            try:
                line = await proc.stdout.readline()
                size = len(line)
            except ValueError:  # one line longer than MAX_LINE_BYTES: dropped
                skipped += 1
                line, size = b"\n", MAX_LINE_BYTES
            if not line:
                return
            total += size
            if total > MAX_STDOUT_BYTES:
                truncated = True
                _kill_group(proc)
                return
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(record, dict):
                entries.append(_entry(record))
            else:
                skipped += 1

    async def read_stderr() -> None:
        nonlocal stderr_logged
        assert proc.stderr is not None
        while True:
            try:
                line = await proc.stderr.readline()
            except ValueError:
                continue
            if not line:
                return
            stderr_tail.extend(line)
            del stderr_tail[:-STDERR_TAIL_BYTES]
            if stderr_logged < MAX_STDERR_LOG_LINES:
                stderr_logged += 1
                ctx.log("journalctl: " + line.decode("utf-8", "replace").rstrip()[:1024])

    try:
        async with asyncio.timeout(timeout_ms / 1000):
            await asyncio.gather(read_stdout(), read_stderr())
            returncode = await proc.wait()
    except TimeoutError:
        raise BuiltinFailure(f"journalctl did not finish within {timeout_ms} ms") from None
    finally:
        _kill_group(proc)
        if proc.returncode is None:
            # SIGKILLed, it is gone at once; bounded all the same, because an exit that another
            # waiter reaped is never reported on uvloop, and this wait would then never end.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), REAP_SECONDS)

    if returncode != 0 and not truncated:
        detail = stderr_tail.decode("utf-8", "replace").strip().splitlines()
        why = detail[-1] if detail else "no error message"
        raise BuiltinFailure(f"journalctl exited with status {returncode}: {why}")
    return {
        "entries": list(entries),
        "count": len(entries),
        "truncated": truncated,
        "skipped_lines": skipped,
        "args": args,
    }
