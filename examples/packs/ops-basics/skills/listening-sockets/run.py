#!/usr/bin/env python3
"""listening_sockets - the TCP sockets this host listens on, from /proc/net/tcp and tcp6.

Wire protocol: JSON args on stdin ({"port": 22} or {}), one JSON object on stdout, log lines on
stderr. Read-only: reads two files of /proc, sends nothing.

    {"sockets": [{"family": "ipv4", "address": "0.0.0.0", "port": 22}], "count": 1}
"""

from __future__ import annotations

import ipaddress
import json
import sys
from typing import Any, NoReturn

SKILL = "listening_sockets"
LISTEN = "0A"
TABLES = (("ipv4", "/proc/net/tcp"), ("ipv6", "/proc/net/tcp6"))


def fail(message: str, status: int = 2) -> NoReturn:
    print(f"{SKILL}: {message}", file=sys.stderr, flush=True)
    sys.exit(status)


def address(hex_text: str) -> str:
    """/proc's address: 32-bit words in the host's (little-endian) byte order."""
    raw = bytes.fromhex(hex_text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening(family: str, path: str, port: int | None) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="ascii") as table:
            lines = table.read().splitlines()[1:]
    except OSError as exc:
        print(f"{SKILL}: warning: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) < 4 or fields[3] != LISTEN:
            continue
        host, _, port_hex = fields[1].partition(":")
        number = int(port_hex, 16)
        if port is None or number == port:
            found.append({"family": family, "address": address(host), "port": number})
    return found


def main() -> None:
    try:
        args = json.loads(sys.stdin.read() or "{}")
    except ValueError as exc:
        fail(f"invalid JSON args: {exc}")
    if not isinstance(args, dict):
        fail("the args must be a JSON object")
    port = args.get("port")
    sockets = [s for family, path in TABLES for s in listening(family, path, port)]
    sockets.sort(key=lambda s: (s["port"], s["family"], s["address"]))
    unique = [s for i, s in enumerate(sockets) if s not in sockets[:i]]
    json.dump({"sockets": unique, "count": len(unique)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
