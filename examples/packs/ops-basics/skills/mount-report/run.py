#!/usr/bin/env python3
"""mount_report - the filesystems mounted on this host and how full they are.

Wire protocol: JSON args on stdin ({"min_used_percent": 90} or {}), one JSON object on stdout,
log lines on stderr. Read-only: reads /proc/self/mounts and calls statvfs on each mount point.

    {"mounts": [{"device": "/dev/sda1", "mount_point": "/", "type": "ext4",
                 "size_bytes": ..., "used_bytes": ..., "available_bytes": ...,
                 "used_percent": 41.2, "inodes_used_percent": 3.1}], "count": 1}
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, NoReturn

SKILL = "mount_report"
PSEUDO = {
    "autofs", "binfmt_misc", "bpf", "cgroup", "cgroup2", "configfs", "debugfs", "devpts",
    "devtmpfs", "fusectl", "hugetlbfs", "mqueue", "nsfs", "proc", "pstore", "securityfs",
    "sysfs", "tracefs",
}  # fmt: skip


def fail(message: str, status: int = 2) -> NoReturn:
    print(f"{SKILL}: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def percent(used: int, total: int) -> float | None:
    return round(100 * used / total, 1) if total else None


def usage(device: str, point: str, fstype: str) -> dict[str, Any] | None:
    try:
        st = os.statvfs(point)
    except OSError as exc:
        print(f"{SKILL}: warning: cannot stat {point}: {exc.strerror}", file=sys.stderr)
        return None
    size = st.f_blocks * st.f_frsize
    avail = st.f_bavail * st.f_frsize
    used = size - st.f_bfree * st.f_frsize
    return {
        "device": device,
        "mount_point": point,
        "type": fstype,
        "size_bytes": size,
        "used_bytes": used,
        "available_bytes": avail,
        "used_percent": percent(used, used + avail),
        "inodes_used_percent": percent(st.f_files - st.f_ffree, st.f_files),
    }


def main() -> None:
    try:
        args = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        fail(f"invalid JSON args: {exc}")
    if not isinstance(args, dict):
        fail("the args must be a JSON object")
    floor = args.get("min_used_percent") or 0
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as table:
            entries = [line.split()[:3] for line in table if len(line.split()) >= 3]
    except OSError as exc:
        fail(f"cannot read /proc/self/mounts: {exc.strerror}", 1)
    mounts = []
    for device, point, fstype in entries:
        point = point.replace("\\040", " ")
        if fstype in PSEUDO or any(m["mount_point"] == point for m in mounts):
            continue
        found = usage(device, point, fstype)
        if found is None:
            continue
        fullest = max(found["used_percent"] or 0, found["inodes_used_percent"] or 0)
        if fullest >= floor:
            mounts.append(found)
    json.dump({"mounts": mounts, "count": len(mounts)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
