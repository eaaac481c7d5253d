#!/usr/bin/env python3
"""host_info - a snapshot of the host: identity, kernel, uptime, load, memory, CPUs.

Wire protocol: an empty JSON object on stdin, one JSON object on stdout, log lines on stderr.
Read-only: reads /proc and /etc/os-release, changes nothing. On a system without /proc (e.g.
macOS) the fields that need it are null and a warning is logged.

    {"hostname": "web1", "os": "Linux",
     "os_release": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-18-amd64",
     "kernel_version": "#1 SMP PREEMPT_DYNAMIC ...", "arch": "x86_64",
     "uptime_seconds": 86400.5, "boot_time": 1717000000,
     "load_average": {"1m": 0.1, "5m": 0.2, "15m": 0.3},
     "memory": {"total_bytes": ..., "available_bytes": ..., "used_percent": 41.2,
                "swap_total_bytes": ..., "swap_free_bytes": ...},
     "cpu_count": 8, "cpu_usable": 8}
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any, NoReturn

SKILL = "host_info"
MAX_ARGS_BYTES = 1 << 20


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
        args = json.loads(raw.decode("utf-8") or "{}")
    except (UnicodeDecodeError, ValueError) as exc:
        fail(f"invalid JSON args: {exc}", 2)
    if not isinstance(args, dict):
        fail("the args must be a JSON object", 2)
    return args


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        log(f"warning: cannot read {path}: {exc.strerror}")
        return None


def uptime_seconds() -> float | None:
    text = read_text("/proc/uptime")
    if text is None:
        return None
    try:
        return float(text.split()[0])
    except (IndexError, ValueError):
        log("warning: unexpected /proc/uptime format")
        return None


def meminfo() -> dict[str, int]:
    """The /proc/meminfo fields, in bytes."""
    text = read_text("/proc/meminfo")
    fields: dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if not parts or not parts[0].isdigit():
            continue
        unit = parts[1].lower() if len(parts) > 1 else ""
        fields[name.strip()] = int(parts[0]) * (1024 if unit == "kb" else 1)
    return fields


def memory() -> dict[str, Any]:
    fields = meminfo()
    total = fields.get("MemTotal")
    available = fields.get("MemAvailable")
    if available is None and total is not None:
        # Kernels before 3.14 have no MemAvailable: approximate it.
        available = fields.get("MemFree", 0) + fields.get("Buffers", 0) + fields.get("Cached", 0)
    used_percent = None
    if total and available is not None:
        used_percent = round(100.0 * (total - available) / total, 1)
    return {
        "total_bytes": total,
        "available_bytes": available,
        "used_percent": used_percent,
        "swap_total_bytes": fields.get("SwapTotal"),
        "swap_free_bytes": fields.get("SwapFree"),
    }


def os_release() -> str | None:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return value.strip().strip("\"'") or None
    return None


def load_average() -> dict[str, float] | None:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        log("warning: load average not available")
        return None
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2)}


def cpu_usable() -> int | None:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def main() -> None:
    args = read_args()
    if args:
        names = ", ".join(json.dumps(k) for k in sorted(args))
        fail(f"host_info takes no arguments, got: {names}", 2)

    uname = os.uname()
    uptime = uptime_seconds()
    result = {
        "hostname": socket.gethostname(),
        "os": uname.sysname,
        "os_release": os_release(),
        "kernel": uname.release,
        "kernel_version": uname.version,
        "arch": uname.machine,
        "uptime_seconds": uptime,
        "boot_time": int(time.time() - uptime) if uptime is not None else None,
        "load_average": load_average(),
        "memory": memory(),
        "cpu_count": os.cpu_count(),
        "cpu_usable": cpu_usable(),
    }
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
