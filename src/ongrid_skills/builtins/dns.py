"""``probe_dns``: what does the host's resolver answer for a name?

This asks the system resolver (``getaddrinfo``: ``/etc/hosts``, ``nsswitch``, the configured DNS
servers), which is what every program on the host sees — the right question for "why can't this
service reach that one". ``A`` asks for IPv4 addresses, ``AAAA`` for IPv6, ``ANY`` for both (it is
*not* a DNS ``ANY`` query).

A name that does not exist (NXDOMAIN) is a failure; a name that exists but has no address of the
asked family answers with an empty list and a note. The operator's net rules apply as to the
probes: a denied name is refused before it is looked up, and an answer holding an address the
rules refuse (link-local, metadata, ``builtin_net_deny``, outside ``builtin_net_allow``) is not
shown (``forbidden_target``).
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Annotated, Any, Literal

from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure, ForbiddenTarget

__all__ = ["probe_dns"]

MAX_NAME_LENGTH = 253

_FAMILIES = {"A": socket.AF_INET, "AAAA": socket.AF_INET6, "ANY": socket.AF_UNSPEC}

# "No such name" as glibc/musl/BSD report it; EAI_NODATA/EAI_ADDRFAMILY are "no address of
# that family" on some systems, which getaddrinfo does not tell apart from NXDOMAIN reliably.
_NOT_FOUND = {
    code
    for code in (
        getattr(socket, "EAI_NONAME", None),
        getattr(socket, "EAI_NODATA", None),
        getattr(socket, "EAI_ADDRFAMILY", None),
    )
    if code is not None
}


def _check_name(name: str) -> str:
    name = name.strip()
    if not name:
        raise BuiltinFailure("name is empty")
    if len(name) > MAX_NAME_LENGTH + 1:  # a trailing dot is allowed
        raise BuiltinFailure(f"name is longer than {MAX_NAME_LENGTH} characters")
    if name.startswith("-") or any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in name):
        raise BuiltinFailure(f"invalid name {name!r}")
    return name


async def _resolve(name: str, family: int, timeout: float) -> list[tuple[int, str, str]]:
    """(family, address, canonical name) triples, in resolver order, without duplicates."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(timeout):
        infos = await loop.getaddrinfo(
            name, None, family=family, type=socket.SOCK_STREAM, flags=socket.AI_CANONNAME
        )
    out: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for fam, _type, _proto, canon, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in seen:
            seen.add(address)
            out.append((int(fam), address, canon))
    return out


async def probe_dns(
    ctx: BuiltinContext,
    name: Annotated[
        str,
        Field(
            description="Host name to resolve (an IP literal resolves to itself).",
            min_length=1,
            max_length=MAX_NAME_LENGTH + 1,
        ),
    ],
    record_type: Annotated[
        Literal["A", "AAAA", "ANY"],
        Field(description="A: IPv4 addresses; AAAA: IPv6; ANY: both (via getaddrinfo)."),
    ] = "A",
    timeout_ms: Annotated[
        int, Field(description="Budget for the resolution, in ms.", ge=1, le=30000)
    ] = 2000,
) -> dict[str, Any]:
    """Resolve ``name`` through the system resolver."""
    name = _check_name(name)
    if record_type not in _FAMILIES:
        raise BuiltinFailure(f"record_type {record_type!r} is not one of A, AAAA, ANY")
    if not 1 <= timeout_ms <= 30000:
        raise BuiltinFailure("timeout_ms must be within 1..30000")
    rules = ctx.reach.net
    why = rules.name_refusal(name)
    if why is not None:
        raise ForbiddenTarget(f"{name} is refused: {why}")
    budget = timeout_ms / 1000
    started = time.monotonic()

    def elapsed() -> float:
        return round((time.monotonic() - started) * 1000, 3)

    note: str | None = None
    try:
        found = await _resolve(name, _FAMILIES[record_type], budget)
    except TimeoutError:
        raise BuiltinFailure(
            f"resolving {name!r} took longer than {timeout_ms} ms (resolver slow or unreachable)"
        ) from None
    except UnicodeError:
        raise BuiltinFailure(f"invalid name {name!r}") from None
    except socket.gaierror as exc:
        if exc.errno not in _NOT_FOUND:
            raise BuiltinFailure(f"cannot resolve {name!r}: {exc.strerror or exc}") from None
        if record_type == "ANY":
            raise BuiltinFailure(f"{name!r} does not exist (NXDOMAIN)") from None
        # Does the name exist with another family? Then it is "no A/AAAA", not NXDOMAIN.
        remaining = budget - (time.monotonic() - started)
        try:
            if remaining <= 0:
                raise TimeoutError
            other = await _resolve(name, socket.AF_UNSPEC, remaining)
        except (socket.gaierror, TimeoutError, UnicodeError):
            raise BuiltinFailure(f"{name!r} does not exist (NXDOMAIN)") from None
        if not other:
            raise BuiltinFailure(f"{name!r} does not exist (NXDOMAIN)") from None
        found = []
        note = f"{name!r} exists but has no {record_type} address"

    rules.check(name, [address for _fam, address, _canon in found])
    canonical = next((canon for _fam, _addr, canon in found if canon), None)
    result: dict[str, Any] = {
        "name": name,
        "record_type": record_type,
        "addresses": [address for _fam, address, _canon in found],
        "canonical_name": canonical,
        "elapsed_ms": elapsed(),
    }
    if note:
        result["note"] = note
    ctx.log(f"probe_dns: {name} {record_type} -> {len(found)} address(es)")
    return result
