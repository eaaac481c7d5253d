"""``probe_http``: what does an HTTP(S) endpoint answer, and how fast?

Read-only by construction: only ``GET`` and ``HEAD``, no request body, no cookies kept, no
environment proxies (``trust_env=False``: the manager's ``HTTP_PROXY``/``NETRC`` never leak into a
probe). Redirects are reported, not followed, unless asked (then at most
:data:`MAX_REDIRECTS`). The body is read only up to ``max_body_bytes`` — the rest is never
downloaded — and decoded with replacement characters, so a binary or huge answer is harmless.
The whole probe (connect, TLS, headers, body excerpt) stays within ``timeout_ms``.

Where it may go is the operator's: every connection (redirect hops included) goes through the
guarded transport (:mod:`ongrid_skills.builtins.transport`), which refuses link-local and cloud
metadata addresses and applies ``builtin_net_allow`` / ``builtin_net_deny`` (``forbidden_target``).
The body is returned only for targets listed in ``builtin_http_body_allow`` (default: none):
otherwise it is not even read, and the result says so (``body_withheld``).
"""

from __future__ import annotations

import asyncio
import codecs
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import httpx
from pydantic import Field

from ongrid_skills.builtins.base import BuiltinContext, BuiltinFailure
from ongrid_skills.builtins.netrules import NetRules, parse_address
from ongrid_skills.builtins.transport import guarded_client

__all__ = ["probe_http"]

MAX_URL_LENGTH = 2048
MAX_REDIRECTS = 5
MAX_BODY_BYTES = 1024 * 1024
USER_AGENT = "ongrid-skills-probe/1"
REPORTED_HEADERS = ("content-type", "content-length", "server", "location")


def check_url(url: str, what: str = "url") -> httpx.URL:
    """An absolute http(s) URL without credentials; anything else is a clear failure."""
    url = url.strip()
    if not url:
        raise BuiltinFailure(f"{what} is empty")
    if len(url) > MAX_URL_LENGTH:
        raise BuiltinFailure(f"{what} is longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in url):
        raise BuiltinFailure(f"{what} contains whitespace or control characters")
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise BuiltinFailure(f"invalid {what} {url!r}: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise BuiltinFailure(
            f"{what} scheme {parsed.scheme or '(none)'!r} is not allowed: only http and https"
        )
    if not parsed.host:
        raise BuiltinFailure(f"{what} {url!r} has no host")
    if parsed.userinfo:
        raise BuiltinFailure(f"{what} must not carry credentials (user:password@)")
    return parsed


def elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def _charset(response: httpx.Response) -> str:
    name = response.charset_encoding or "utf-8"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "utf-8"


def _cert_name(entries: Any) -> str | None:
    """The commonName of an ``ssl.getpeercert()`` subject/issuer, if present."""
    if not isinstance(entries, tuple | list):
        return None
    for rdn in entries:
        for item in rdn:
            if isinstance(item, tuple | list) and len(item) == 2 and item[0] == "commonName":
                return str(item[1])
    return None


def _tls_info(response: httpx.Response) -> dict[str, Any] | None:
    stream = response.extensions.get("network_stream")
    if stream is None:
        return None
    ssl_object = stream.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    cipher = ssl_object.cipher()
    info: dict[str, Any] = {
        "version": ssl_object.version(),
        "cipher": cipher[0] if cipher else None,
    }
    cert = ssl_object.getpeercert()  # {} when the chain was not verified
    if cert:
        info["subject"] = _cert_name(cert.get("subject"))
        info["issuer"] = _cert_name(cert.get("issuer"))
        not_after = cert.get("notAfter")
        if isinstance(not_after, str):
            try:
                expires = datetime.strptime(not_after, "%b %d %H:%M:%S %Y %Z").replace(tzinfo=UTC)
            except ValueError:
                info["not_after"] = not_after
            else:
                info["not_after"] = expires.isoformat()
                info["days_left"] = (expires - datetime.now(UTC)).days
    return info


def _body_allowed(rules: NetRules, response: httpx.Response) -> bool:
    """Whether the operator lets bodies of this answer's host (or address) be returned."""
    stream = response.extensions.get("network_stream")
    peer = stream.get_extra_info("server_addr") if stream is not None else None
    address = parse_address(str(peer[0])) if isinstance(peer, tuple) and peer else None
    return rules.body_allowed(response.url.host, address)


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the raw body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def probe_http(
    ctx: BuiltinContext,
    url: Annotated[
        str,
        Field(
            description="Absolute http:// or https:// URL to request.",
            min_length=1,
            max_length=MAX_URL_LENGTH,
        ),
    ],
    method: Annotated[
        Literal["GET", "HEAD"], Field(description="HTTP method: GET or HEAD only.")
    ] = "GET",
    timeout_ms: Annotated[
        int,
        Field(
            description="Budget for the whole request, body excerpt included, in ms.",
            ge=1,
            le=60000,
        ),
    ] = 5000,
    expect_status: Annotated[
        int | None,
        Field(
            description="Status that counts as ok; when absent any 2xx or 3xx is ok.",
            ge=100,
            le=599,
        ),
    ] = None,
    max_body_bytes: Annotated[
        int,
        Field(
            description="Most bytes of the body to read and return (0 = none).",
            ge=0,
            le=MAX_BODY_BYTES,
        ),
    ] = 65536,
    follow_redirects: Annotated[
        bool,
        Field(description=f"Follow redirects (at most {MAX_REDIRECTS}); default: report them."),
    ] = False,
    verify_tls: Annotated[
        bool, Field(description="Verify the server's TLS certificate chain and host name.")
    ] = True,
) -> dict[str, Any]:
    """Request ``url`` once and report status, timing, key headers and a body excerpt."""
    parsed = check_url(url)
    if method not in ("GET", "HEAD"):
        raise BuiltinFailure(f"method {method!r} is not allowed: only GET and HEAD")
    if not 1 <= timeout_ms <= 60000:
        raise BuiltinFailure("timeout_ms must be within 1..60000")
    if not 0 <= max_body_bytes <= MAX_BODY_BYTES:
        raise BuiltinFailure(f"max_body_bytes must be within 0..{MAX_BODY_BYTES}")
    if expect_status is not None and not 100 <= expect_status <= 599:
        raise BuiltinFailure("expect_status must be within 100..599")

    rules = ctx.reach.net
    budget = timeout_ms / 1000
    started = time.monotonic()
    try:
        async with (
            asyncio.timeout(budget),
            guarded_client(
                rules,
                verify=verify_tls,
                follow_redirects=follow_redirects,
                max_redirects=MAX_REDIRECTS,
                timeout=httpx.Timeout(budget),
                headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            ) as client,
            client.stream(method, parsed) as response,
        ):
            headers_ms = elapsed_ms(started)
            tls = _tls_info(response)
            withheld = not _body_allowed(rules, response)
            if method == "GET" and max_body_bytes > 0 and not withheld:
                body, truncated = await _read_capped(response, max_body_bytes)
            else:
                body, truncated = b"", False
    except TimeoutError:
        raise BuiltinFailure(f"{url}: no complete answer within {timeout_ms} ms") from None
    except httpx.TimeoutException as exc:
        raise BuiltinFailure(f"{url}: timed out ({type(exc).__name__})") from None
    except httpx.TooManyRedirects:
        raise BuiltinFailure(f"{url}: more than {MAX_REDIRECTS} redirects") from None
    except httpx.UnsupportedProtocol as exc:
        raise BuiltinFailure(f"{url}: redirected to an unsupported URL: {exc}") from None
    except httpx.ConnectError as exc:
        raise BuiltinFailure(f"{url}: cannot connect: {exc or 'connection failed'}") from None
    except httpx.HTTPError as exc:
        raise BuiltinFailure(f"{url}: {type(exc).__name__}: {exc}") from None

    status = response.status_code
    ok = status == expect_status if expect_status is not None else 200 <= status < 400
    content_encoding = response.headers.get("content-encoding", "identity").lower()
    result: dict[str, Any] = {
        "url": str(parsed),
        "method": method,
        "status": status,
        "reason_phrase": response.reason_phrase,
        "http_version": response.http_version,
        "ok": ok,
        "elapsed_ms": elapsed_ms(started),
        "headers_ms": headers_ms,
        "headers": {
            name: response.headers[name] for name in REPORTED_HEADERS if name in response.headers
        },
        "body_excerpt": None,
        "body_bytes": len(body),
        "body_truncated": truncated,
        "tls": tls,
    }
    if withheld and method == "GET":
        result["body_withheld"] = True
        result["body_note"] = (
            f"body not returned: {response.url.host} is not in builtin_http_body_allow"
        )
    elif body or method == "GET":
        if content_encoding not in ("identity", ""):
            result["body_note"] = f"body is {content_encoding}-encoded; not decoded"
        else:
            result["body_excerpt"] = body.decode(_charset(response), errors="replace")
    if follow_redirects:
        result["final_url"] = str(response.url)
        result["redirects"] = [
            {"status": hop.status_code, "url": str(hop.url)} for hop in response.history
        ]
    ctx.log(f"probe_http: {method} {parsed} -> {status} in {result['elapsed_ms']} ms")
    return result
