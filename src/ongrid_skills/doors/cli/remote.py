"""The HTTP client of the commands that talk to a server (``--url``/``--token``, or
``ONGRID_URL``/``ONGRID_TOKEN``): requests, HTTP errors mapped to exit codes, and Server-Sent
Events followed across broken connections.

HTTP status → exit code, here and nowhere else (:func:`exit_code`): 403 → 3 (denied), any other
4xx → 2 (usage or input; 401, a bad or revoked token, included), 5xx → 1. A server that cannot be
reached is a 2, and the message names the URL.

A stream that breaks (the connection drops, the server restarts, a proxy cuts it, or nothing —
not even a heartbeat — arrives for :data:`READ_TIMEOUT` seconds) is reconnected for up to
:data:`RECONNECT_SECONDS`, resuming after the last event read (``Last-Event-ID``) where the
server numbers its events. A stream the server ends with an ``error`` event (the token was
revoked while it was open) is not: the command says why and exits 2. httpx is imported when a
client is made, never at start-up. This module never prints a result: the commands do.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "http://127.0.0.1:8731"
#: How long a broken stream is retried before the command gives up.
RECONNECT_SECONDS = 30.0
#: Longest silence on a stream before it counts as broken (the server sends a comment every 15 s).
READ_TIMEOUT = 60.0


def remote_options(func: Any) -> Any:
    """``--url`` and ``--token`` (with their environment variables) for a command."""
    func = click.option("--token", envvar="ONGRID_TOKEN", help="API token (or ONGRID_TOKEN).")(func)
    return click.option(
        "--url",
        envvar="ONGRID_URL",
        default=DEFAULT_URL,
        show_default=True,
        help="Server URL (or ONGRID_URL).",
    )(func)


def exit_code(status: int) -> int:
    """HTTP status → exit code: 403 denied (3), other 4xx usage or input (2), 5xx failed (1)."""
    if status == 403:
        return 3
    return 2 if status < 500 else 1


def fail(message: str, code: int = 2) -> NoReturn:
    """Say what went wrong on stderr and exit with ``code``."""
    click.echo(f"ongrid-skills: {message}", err=True)
    sys.exit(code)


@dataclass(frozen=True, slots=True)
class Sse:
    """One Server-Sent Event: its type, its data (data lines joined by newlines) and its id."""

    event: str
    data: str
    id: str | None = None


class StreamLost(Exception):
    """A stream broke and could not be resumed in time; the message says why (``status``: the
    server's 5xx, when it answered one)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Remote:
    """One server, one token; the HTTP client closes with the command.

    Made, it says on stderr which server the command talks to (``→ URL (where it came
    from)``, not under ``-q``), unless ``footnote`` is given: the caller announced it already
    (:mod:`ongrid_skills.doors.cli.target`), and every error adds that footnote."""

    def __init__(self, url: str, token: str | None, *, footnote: str | None = None) -> None:
        import httpx  # noqa: PLC0415 - lazy: the server stack is not loaded at start-up

        self.footnote = footnote
        if footnote is None:
            announce(url)
        if not token:
            self.fail("a token is needed: --token or ONGRID_TOKEN")
        self.httpx = httpx
        self.url = url.rstrip("/")
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )
        # Closed with the command (also when it exits early), not left to the garbage collector.
        click.get_current_context().call_on_close(self.client.close)

    def fail(self, message: str, code: int = 2) -> NoReturn:
        """:func:`fail`, with the footnote of a command whose target was chosen for it."""
        if self.footnote:
            message = f"{message}\nongrid-skills: {self.footnote}"
        fail(message, code)

    # ---- requests ------------------------------------------------------------------------
    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The answer, whatever its status; a server that cannot be reached exits 2."""
        try:
            return self.client.request(method, path, **kwargs)
        except self.httpx.HTTPError as exc:
            self.fail(unreachable(self.url, exc))

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON body of a successful answer; an error answer exits with its code."""
        return self.call_text(method, path, **kwargs)[0]

    def call_text(self, method: str, path: str, **kwargs: Any) -> tuple[Any, str]:
        """The JSON body of a successful answer and its text as the server sent it."""
        response = self.send(method, path, **kwargs)
        if response.status_code >= 400:
            code, message = error_of(response)
            self.fail(f"{code}: {message}", exit_code(response.status_code))
        return (response.json() if response.content else {}), response.text

    # ---- streams -------------------------------------------------------------------------
    def follow(
        self, path: str, *, params: dict[str, str] | None = None, until: str | None = "end"
    ) -> Iterator[Sse]:
        """The events of a stream until an ``until`` event (included) or, for a stream that
        never ends, for as long as the caller reads. A stream that breaks is reconnected,
        after the last event id read; a first connection that fails exits 2 at once, an error
        answer exits with its code."""
        last_id: str | None = None
        connected = False
        lost_since: float | None = None
        pause = 0.25
        while True:
            try:
                for event in self._events(path, params, last_id):
                    connected = True
                    if lost_since is not None:
                        click.echo("ongrid-skills: reconnected", err=True)
                        lost_since, pause = None, 0.25
                    if event.id is not None:
                        last_id = event.id
                    if event.event:
                        yield event
                    if until is not None and event.event == until:
                        return
                reason = "the server closed the stream"
            except StreamLost as exc:
                if not connected and exc.status is not None:
                    self.fail(f"{self.url}: {exc}", exit_code(exc.status))
                if not connected:
                    self.fail(unreachable(self.url, exc))
                reason = str(exc)
            now = time.monotonic()
            if lost_since is None:
                lost_since = now
                click.echo(f"ongrid-skills: {reason}; reconnecting to {self.url}…", err=True)
            elif now - lost_since > RECONNECT_SECONDS:
                raise StreamLost(f"{reason}; gave up after {RECONNECT_SECONDS:g} s")
            time.sleep(pause)  # a pause between attempts, not a wait for a condition
            pause = min(pause * 2, 2.0)

    def _events(
        self, path: str, params: dict[str, str] | None, last_id: str | None
    ) -> Iterator[Sse]:
        """One connection's events, with comments as events of no type (so that the caller
        knows the stream is alive); a broken connection raises :class:`StreamLost`."""
        headers = {"Last-Event-ID": last_id} if last_id is not None else {}
        timeout = self.httpx.Timeout(10.0, read=READ_TIMEOUT)
        try:
            with self.client.stream(
                "GET", path, params=params, headers=headers, timeout=timeout
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    if response.status_code >= 500:  # a server restarting, a proxy's 502
                        status = response.status_code
                        raise StreamLost(f"the server answered {status}", status)
                    code, message = error_of(response)
                    self.fail(f"{code}: {message}", exit_code(response.status_code))
                for event in parse_sse(response.iter_lines()):
                    if event.event == "error":  # the server's last word: no reconnecting
                        code, message = stream_error(event.data)
                        self.fail(
                            f"{code}: {message}", exit_code(401 if code == "unauthorized" else 500)
                        )
                    yield event
        except self.httpx.HTTPError as exc:
            raise StreamLost(_reason(exc)) from None


def parse_sse(lines: Iterator[str]) -> Iterator[Sse]:
    """Server-Sent Events from lines, as a browser reads them: data lines joined with newlines,
    an event per blank line; a comment (``: ping``) is an event with no type."""
    event, ident = "message", None
    data: list[str] = []
    for line in lines:
        if line.startswith(":"):
            yield Sse("", line[1:].strip())
        elif not line:
            if data:
                yield Sse(event, "\n".join(data), ident)
            event, data = "message", []
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = value


def error_of(response: httpx.Response) -> tuple[str, str]:
    """(code, message) of an error answer: the API's error body, or what a proxy sent."""
    try:
        body = response.json()
    except ValueError:  # not JSON: a proxy's page, uvicorn's plain-text 400…
        return str(response.status_code), response.text[:500]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("code", response.status_code)), str(error.get("message", body))
    return str(response.status_code), str(body)[:500]


def stream_error(data: str) -> tuple[str, str]:
    """(code, message) of a stream's ``error`` event (its data is an API error body)."""
    try:
        error = json.loads(data).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        return str(error.get("code", "error")), str(error.get("message", data))
    return "error", data[:500]


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def origin_of_url() -> str:
    """Where the running command's ``--url`` came from, in words."""
    from click.core import ParameterSource  # noqa: PLC0415 - only when a server is asked

    context = click.get_current_context(silent=True)
    source = context.get_parameter_source("url") if context is not None else None
    if source is ParameterSource.DEFAULT:
        return "the default URL"
    if source is ParameterSource.ENVIRONMENT:
        return "ONGRID_URL"
    return "--url"


def announce(url: str) -> None:
    """``→ URL (ONGRID_URL)`` on stderr: which server the command talks to (not under -q)."""
    context = click.get_current_context(silent=True)
    obj = context.obj if context is not None else None
    if getattr(obj, "quiet", False):
        return
    click.echo(f"→ {url} ({origin_of_url()})", err=True)


def unreachable(url: str, exc: Exception) -> str:
    """``cannot reach URL: connection refused — is `ongrid-skills serve` running? …``: the URL
    asked, why (the OS's words, without the errno), where the URL came from, and what to do."""
    reason = _reason(exc)
    if reason.startswith("[Errno"):
        reason = reason.partition("] ")[2] or reason
    reason = reason[:1].lower() + reason[1:]
    origin = origin_of_url()
    whence = {"ONGRID_URL": " (from ONGRID_URL)", "the default URL": " (the default URL)"}.get(
        origin, ""
    )
    return (
        f"cannot reach {url}{whence}: {reason} — is `ongrid-skills serve` running? "
        "set --url or ONGRID_URL"
    )
