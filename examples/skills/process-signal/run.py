#!/usr/bin/env python3
"""process_signal - send TERM, KILL, HUP or INT to one process.

Wire protocol: args JSON object on stdin, one JSON object on stdout, log lines on stderr.

    {"pid": 4242, "signal": "TERM"}
    -> {"pid": 4242, "signal": "TERM", "sent": true, "name": "nginx"}

Guards: the pid must be a positive integer above 1 (0, negatives and 1 would reach process
groups, every process, or init); the skill refuses to signal itself and any of its ancestors
(its parent is the skill manager). Signals go to one process only, never to a group.
Errors (no such process, permission denied, bad args) print a message on stderr and exit
non-zero (2 for bad args, 1 otherwise) without any JSON on stdout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, NoReturn

SKILL = "process_signal"
MAX_ARGS_BYTES = 1 << 20
SIGNALS = {
    "TERM": signal.SIGTERM,
    "KILL": signal.SIGKILL,
    "HUP": signal.SIGHUP,
    "INT": signal.SIGINT,
}
PID_MAX = 4_194_304  # Linux PID_MAX_LIMIT


def log(message: str) -> None:
    print(f"{SKILL}: {message}", file=sys.stderr, flush=True)


def fail(message: str, status: int = 1) -> NoReturn:
    log(message)
    sys.exit(status)


def read_args() -> dict[str, Any]:
    raw = sys.stdin.buffer.read(MAX_ARGS_BYTES + 1)
    if len(raw) > MAX_ARGS_BYTES:
        fail("args larger than 1 MiB", 2)
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        fail(f"invalid JSON args: {exc}", 2)
    if not isinstance(args, dict):
        fail("the args must be a JSON object", 2)
    return args


def parse_args(args: dict[str, Any]) -> tuple[int, str]:
    unknown = sorted(set(args) - {"pid", "signal"})
    if unknown:
        fail(f"unknown argument(s): {', '.join(json.dumps(k) for k in unknown)}", 2)
    if "pid" not in args:
        fail('"pid" is required', 2)
    pid = args["pid"]
    if isinstance(pid, float) and pid.is_integer():
        pid = int(pid)  # 4242.0 is an integer for JSON Schema
    if not isinstance(pid, int) or isinstance(pid, bool):
        fail('"pid" must be an integer', 2)
    if pid <= 1:
        fail(f"refusing pid {pid}: must be greater than 1", 2)
    if pid > PID_MAX:
        fail(f"refusing pid {pid}: above the largest possible pid {PID_MAX}", 2)
    name = args.get("signal", "TERM")
    if name not in SIGNALS:
        fail(f'"signal" must be one of {", ".join(SIGNALS)}', 2)
    return pid, name


def parent_of(pid: int) -> int | None:
    """The parent pid from /proc (None when unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the
    # last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def ancestors() -> set[int]:
    """This process's parent, grandparent, ... up to (excluding) init."""
    found: set[int] = set()
    pid: int | None = os.getppid()
    while pid is not None and pid > 1 and pid not in found:
        found.add(pid)
        pid = parent_of(pid)
    return found


def process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def main() -> None:
    pid, name = parse_args(read_args())
    if pid == os.getpid():
        fail(f"refusing pid {pid}: it is this skill itself")
    if pid in ancestors():
        fail(f"refusing pid {pid}: it is an ancestor of this skill (the manager or above)")

    process = process_name(pid)
    shown = f"pid {pid}" + (f" ({json.dumps(process)})" if process else "")
    log(f"sending SIG{name} to {shown}")
    try:
        os.kill(pid, SIGNALS[name])
    except ProcessLookupError:
        fail(f"no such process: {pid}")
    except PermissionError:
        fail(f"permission denied: not allowed to signal {shown}")
    except OSError as exc:
        fail(f"cannot signal {shown}: {exc.strerror}")
    log(f"SIG{name} sent to {shown}")
    json.dump({"pid": pid, "signal": name, "sent": True, "name": process}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
