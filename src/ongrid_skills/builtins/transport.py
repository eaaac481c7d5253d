"""The HTTP transport of the built-ins: it connects only where the net rules allow.

Every TCP connection httpx opens (the first request, each redirect hop) goes through
:class:`GuardedBackend`: the host is resolved once, *every* address is checked against the
:class:`~ongrid_skills.builtins.netrules.NetRules`, and the connection is made to those very
addresses — an IP literal handed to the socket layer, so nothing resolves the name again between
the check and the connect (DNS rebinding). TLS still verifies the certificate against the host
name of the URL (httpcore passes it as the server name), not against the address.

Never use a plain ``httpx.AsyncClient`` in a built-in: use :func:`guarded_client`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from ongrid_skills.builtins.failures import ForbiddenTarget
from ongrid_skills.builtins.netrules import NetRules

__all__ = ["GuardedBackend", "guarded_client", "resolve_checked"]


async def resolve_checked(rules: NetRules, host: str, port: int) -> list[str]:
    """The addresses of ``host`` (resolver order), once every one passed the rules.

    Raises ForbiddenTarget, or httpcore.ConnectError when the name does not resolve."""
    why = rules.name_refusal(host)
    if why is not None:
        raise ForbiddenTarget(f"{host} is refused: {why}")
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from None
    addresses: list[str] = []
    for info in infos:
        text = str(info[4][0])
        if text not in addresses:
            addresses.append(text)
    rules.check(host, addresses)
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the net rules applied at each connect."""

    def __init__(self, rules: NetRules) -> None:
        self.rules = rules
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve_checked(self.rules, host, port)
        error: Exception | None = None
        for address in addresses:  # as a browser would: the next address when one fails
            try:
                return await self.inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None, "resolve_checked() never returns an empty list"
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ForbiddenTarget("built-ins never connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, rules: NetRules, verify: bool) -> None:
        super().__init__(verify=verify, trust_env=False)
        # httpx has no public hook for the network backend: its pool is rebuilt here with ours
        # (same TLS context as httpx would build, no proxy: trust_env is off).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=GuardedBackend(rules),
        )


def guarded_client(rules: NetRules, *, verify: bool = True, **kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` (no environment proxies or netrc) bound to ``rules``."""
    return httpx.AsyncClient(transport=_GuardedTransport(rules, verify), trust_env=False, **kwargs)
