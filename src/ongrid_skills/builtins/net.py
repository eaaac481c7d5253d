"""``probe_tcp``: can a TCP connection be opened to host:port, and how fast?

Read-only: the probe opens a connection and closes it at once, without sending a byte. The whole
probe (name resolution plus every connect attempt) stays within ``timeout_ms``. When a name has
several addresses they are tried in the order the resolver gives, until one connects.

The outcome is data, not a failure: a closed port is an answer (``open: false`` with a
``reason``), so the model can reason about it. A target the operator's net rules refuse
(link-local, cloud metadata, ``builtin_net_deny``, outside ``builtin_net_allow``) is a failure,
``forbidden_target``: every resolved address is checked before any connect, and the connects go
to exactly those addresses.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from typing import Annotated, Any, Literal

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, ForbiddenTarget

__all__ = ["probe_tcp"]

Reason = Literal["connected", "refused", "timeout", "dns", "unreachable"]

MAX_HOST_LENGTH = 253


def check_host(host: str) -> str:
    """A host name or address, stripped; no whitespace, control characters or leading dash."""
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):  # "[::1]" as written in URLs
        host = host[1:-1]
    if not host:
        raise BuiltinFailure("host is empty")
    if len(host) > MAX_HOST_LENGTH:
        raise BuiltinFailure(f"host is longer than {MAX_HOST_LENGTH} characters")
    if host.startswith("-") or any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in host):
        raise BuiltinFailure(f"invalid host {host!r}")
    return host


def _format_address(sockaddr: tuple[Any, ...]) -> str:
    ip, port = sockaddr[0], sockaddr[1]
    return f"[{ip}]:{port}" if ":" in str(ip) else f"{ip}:{port}"


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


async def _connect(
    family: int, sockaddr: tuple[Any, ...], timeout: float
) -> tuple[Reason, str | None]:
    loop = asyncio.get_running_loop()
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await loop.sock_connect(sock, sockaddr)
        except TimeoutError:
            return "timeout", f"no answer within {round(timeout * 1000)} ms"
        except ConnectionRefusedError:
            return "refused", "connection refused"
        except OSError as exc:
            if exc.errno == errno.ETIMEDOUT:
                return "timeout", exc.strerror or str(exc)
            if exc.errno == errno.ECONNREFUSED:
                return "refused", "connection refused"
            # ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EAFNOSUPPORT…: no route to a listener.
            return "unreachable", exc.strerror or str(exc)
        return "connected", None
    finally:
        sock.close()


async def probe_tcp(
    ctx: BuiltinContext,
    host: Annotated[
        str,
        Field(
            description="Host name or IP address (IPv6 with or without brackets).",
            min_length=1,
            max_length=MAX_HOST_LENGTH + 2,
        ),
    ],
    port: Annotated[int, Field(description="TCP port.", ge=1, le=65535)],
    timeout_ms: Annotated[
        int,
        Field(
            description="Budget for the whole probe (resolution and connect), in ms.",
            ge=1,
            le=60000,
        ),
    ] = 2000,
) -> dict[str, Any]:
    """Open (and immediately close) a TCP connection to host:port."""
    host = check_host(host)
    if not 1 <= port <= 65535:
        raise BuiltinFailure(f"port {port} is out of range 1..65535")
    if not 1 <= timeout_ms <= 60000:
        raise BuiltinFailure("timeout_ms must be within 1..60000")
    rules = ctx.reach.net
    why = rules.name_refusal(host)
    if why is not None:
        raise ForbiddenTarget(f"{host} is refused: {why}")
    budget = timeout_ms / 1000
    started = time.monotonic()
    deadline = started + budget
    loop = asyncio.get_running_loop()

    def result(
        reason: Reason, address: str | None, error: str | None, tried: int = 0
    ) -> dict[str, Any]:
        return {
            "host": host,
            "port": port,
            "open": reason == "connected",
            "elapsed_ms": _elapsed_ms(started),
            "reason": reason,
            "address": address,
            "error": error,
            "addresses_tried": tried,
        }

    try:
        async with asyncio.timeout(budget):
            infos = await loop.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
            )
    except TimeoutError:
        return result("timeout", None, f"name resolution took longer than {timeout_ms} ms")
    except socket.gaierror as exc:
        return result("dns", None, f"cannot resolve {host!r}: {exc.strerror or exc}")
    except UnicodeError:
        return result("dns", None, f"cannot resolve {host!r}: invalid name")

    # Same address may come back once per socket type/protocol on some platforms.
    seen: set[tuple[int, tuple[Any, ...]]] = set()
    targets: list[tuple[int, tuple[Any, ...]]] = []
    for info in infos:
        key = (int(info[0]), tuple(info[4]))
        if key not in seen:
            seen.add(key)
            targets.append(key)
    if not targets:
        return result("dns", None, f"{host!r} resolved to no address")
    rules.check(host, [str(sockaddr[0]) for _family, sockaddr in targets])

    last: tuple[Reason, str | None, str | None] = ("timeout", None, "no time left")
    tried = 0
    for family_number, sockaddr in targets:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        address = _format_address(sockaddr)
        tried += 1
        reason, error = await _connect(family_number, sockaddr, remaining)
        if reason == "connected":
            return result(reason, address, None, tried)
        if len(targets) > 1:
            ctx.log(f"probe_tcp: {address}: {reason}")
        last = (reason, address, error)
    return result(last[0], last[1], last[2], tried)
