"""Downloading a pack archive (or an index, or a signature) from an ``https://`` URL, bounded.

Every download is bounded three ways, and refused rather than truncated:

- **size** — a ``Content-Length`` over the cap is refused before the body is read; the body is
  counted as it streams and the download stops at the first byte over the cap (a pack archive's
  cap is the one unpacking applies to an archive file: :func:`.unpack.stream_cap`);
- **time** — one deadline for the whole download, redirects included, checked at every chunk
  received (a server that dribbles a byte a second is cut off too), and no single wait for the
  server longer than :data:`STALL_SECONDS` (or the time left, when less);
- **redirects** — at most :data:`MAX_REDIRECTS`, each to an allowed scheme: ``https`` only, or
  ``http`` as well when the operator allows it (``ONGRID_PACK_ALLOW_HTTP``), never from
  ``https`` down to ``http`` without that setting.

Proxies and CA bundles come from the usual variables (``HTTPS_PROXY``, ``SSL_CERT_FILE``), as
httpx reads them. A URL's user name, password and query are never repeated in a message or a
record (:func:`shown_url`): they may carry credentials. This module writes only the file it is
asked to write; it must never follow a redirect it did not check.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from ongrid_skills.errors import FetchFailed

MAX_REDIRECTS = 5
#: The longest one connect or read may wait for the server.
STALL_SECONDS = 30.0
_USER_AGENT = "ongrid-skills (pack fetch)"


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """How a download is bounded: ``max_bytes``, ``timeout`` (seconds, the whole download),
    ``allow_http`` (plain http:// as well as https://)."""

    max_bytes: int
    timeout: float = 300.0
    allow_http: bool = False

    def check_url(self, url: str) -> None:
        """FetchFailed unless ``url`` is absolute with a host and an allowed scheme."""
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - a malformed port raises ValueError here
        except ValueError:
            raise FetchFailed(f"{shown_url(url)}: not a valid URL") from None
        scheme = parts.scheme.lower()
        if scheme == "http" and not self.allow_http:
            raise FetchFailed(
                f"{shown_url(url)}: plain http:// is not allowed (https:// only; "
                "ONGRID_PACK_ALLOW_HTTP=1 allows it)"
            )
        if scheme not in ("http", "https") or not parts.hostname:
            raise FetchFailed(f"{shown_url(url)}: not an https:// URL")


def is_url(text: str) -> bool:
    """True for ``http://`` and ``https://`` URLs (in any letter case)."""
    return text.lower().startswith(("http://", "https://"))


def shown_url(url: str) -> str:
    """``url`` without user name, password, query or fragment: safe to show and to record."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<a malformed URL>"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def download(url: str, target: Path, policy: FetchPolicy, *, missing_ok: bool = False) -> bool:
    """Download ``url`` into the new file ``target`` within ``policy``. Returns False (and
    writes nothing) when the server answers 404 and ``missing_ok``; raises FetchFailed for
    anything else that is not a 200 with a body within the limits."""
    deadline = time.monotonic() + policy.timeout
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            found = _fetch(url, policy, deadline, missing_ok, out.write)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    if not found:
        target.unlink(missing_ok=True)
    return found


def fetch_bytes(url: str, policy: FetchPolicy) -> bytes:
    """The body of ``url`` within ``policy`` (for an index: small, read whole)."""
    chunks: list[bytes] = []
    _fetch(url, policy, time.monotonic() + policy.timeout, False, chunks.append)
    return b"".join(chunks)


Sink = Callable[[bytes], object]


def _fetch(url: str, policy: FetchPolicy, deadline: float, missing_ok: bool, write: Sink) -> bool:
    shown = shown_url(url)
    policy.check_url(url)
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    try:
        with httpx.Client(follow_redirects=False, headers=headers) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                timeout = httpx.Timeout(min(STALL_SECONDS, _left(deadline, shown, policy)))
                with client.stream("GET", url, timeout=timeout) as response:
                    if response.is_redirect:
                        url = _next_hop(url, response, policy)
                        continue
                    if response.status_code == 404 and missing_ok:
                        return False
                    if response.status_code != 200:
                        raise FetchFailed(f"{shown}: the server answered {response.status_code}")
                    _body(response, policy, deadline, shown, write)
                    return True
    except httpx.TimeoutException:
        raise FetchFailed(f"{shown}: the server did not answer in time") from None
    except httpx.HTTPError as exc:
        raise FetchFailed(f"{shown}: {type(exc).__name__}: {exc}") from None
    raise FetchFailed(f"{shown}: more than {MAX_REDIRECTS} redirects")


def _next_hop(url: str, response: httpx.Response, policy: FetchPolicy) -> str:
    location = response.headers.get("location")
    if not location:
        raise FetchFailed(f"{shown_url(url)}: a redirect without a Location")
    target = str(urllib.parse.urljoin(url, str(location)))
    policy.check_url(target)  # an https:// URL redirected to http:// is refused here too
    return target


def _body(
    response: httpx.Response, policy: FetchPolicy, deadline: float, shown: str, write: Sink
) -> None:
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > policy.max_bytes:
        raise FetchFailed(f"{shown}: {declared} bytes, over the limit of {policy.max_bytes}")
    seen = 0
    for chunk in response.iter_raw():  # as received: a chunk size would wait to fill it
        seen += len(chunk)
        if seen > policy.max_bytes:
            raise FetchFailed(f"{shown}: over the limit of {policy.max_bytes} bytes")
        _left(deadline, shown, policy)
        write(chunk)


def _left(deadline: float, shown: str, policy: FetchPolicy) -> float:
    """Seconds left before ``deadline``; FetchFailed once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchFailed(f"{shown}: took longer than {policy.timeout:g} s")
    return left
