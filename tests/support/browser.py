"""The web console under test: the served app under uvicorn on a loopback port, plain HTTP
sessions against it, and Debian's Chromium driven by Playwright.

- :func:`console_server` / fixture `console` (one per test module): the composed app of
  ``serve`` (REST, MCP, console) under uvicorn in a thread, on a fresh data dir holding the
  repository's example skills, a few test skills (:data:`CONSOLE_SKILLS`), two personas and one
  token per name of ``server.ROLES``. In-process, so a test can reach the store (to age a
  session, revoke a token) and the console app's state.
- :meth:`Console.http` / :meth:`Console.logged_in`: httpx clients, anonymous or logged in.
- fixture `browser` (one per test module): headless Chromium at ``/usr/bin/chromium``; a browser
  that cannot start FAILS the test, never skips it (``.ci/run`` installs the package).
- fixture `page`: a fresh context (1280×800) and page whose console is watched: any console
  error, uncaught page error or Content-Security-Policy violation fails the test at teardown,
  unless the test said it expects it (``page_guard.expect("status of 403")``).
- :func:`login` logs a page in through the form; :func:`screenshot` writes a PNG into
  ``tests/.screenshots/`` (git-ignored).
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.doors.cli.server import MAX_REQUEST_HEAD_BYTES
from ongrid_skills.doors.cli.serving import proxy_options
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from tests.support.server import ROLES, make_settings
from tests.support.skills import EXAMPLE_SKILLS, write_persona, write_skill
from tests.support.waiting import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / ".screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}

#: Waits for the file named by its ``gate`` argument, then succeeds: a call that stays running
#: exactly as long as a test wants. (Skills run with an empty environment: sh's default PATH.)
GATED = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo 'waiting for the gate' >&2
while [ ! -e "$gate" ]; do /bin/sleep 0.01; done
echo '{"opened": true}'
"""
GATED_SCHEMA = {
    "type": "object",
    "properties": {"gate": {"type": "string"}},
    "required": ["gate"],
}
#: The console's own test skills, beside the examples: name → class.
CONSOLE_SKILLS = {
    "gated_wait": "safe",
    "restart_cache": "mutating",
    "wipe_scratch": "dangerous",
    "odd_text": "safe",
}
#: A description pages must show as text, never as markup.
ODD_TEXT = 'Shows <b>bold</b> & <script>alert("x")</script> as text, "quoted".'


@dataclass
class Console:
    """A served app on loopback: its URL, store, settings, tokens, and the two apps."""

    url: str
    store: Store
    settings: Settings
    app: Any  # the composed app (REST at the root of its stack)
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def web(self) -> Any:
        """The console's own app (its state: throttle, assets, templates)."""
        return self.app.state.console

    @property
    def manager(self) -> Any:
        return self.app.state.manager

    def http(self, **kw: Any) -> httpx.Client:
        """An anonymous client that does not follow redirects (tests look at them)."""
        return httpx.Client(base_url=self.url, follow_redirects=False, timeout=15, **kw)

    @contextmanager
    def logged_in(self, who: str = "admin", **kw: Any) -> Iterator[httpx.Client]:
        """A client logged in through the login form as ``who``, for a ``with`` block."""
        with self.http(**kw) as client:
            response = login_http(client, self.tokens[who])
            assert response.status_code == 303, response.text
            yield client

    def rest(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        """A REST call with ``who``'s bearer token."""
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.url + path, headers=headers, timeout=15, **kw)

    def csrf(self, client: httpx.Client, path: str = "/skills") -> str:
        """The CSRF token a page of ``client``'s session carries."""
        return csrf_of(client.get(path).text)


CSRF_RE = re.compile(r'name="csrf" value="([^"]*)"')


def csrf_of(html: str) -> str:
    match = CSRF_RE.search(html)
    assert match, "no csrf field in the page"
    return match.group(1)


def login_http(
    client: httpx.Client, token: str, next_path: str = "/skills", forwarded_for: str | None = None
) -> httpx.Response:
    """The login dance of a browser: the form (its nonce cookie), then the post (sent with
    ``X-Forwarded-For: forwarded_for`` when given)."""
    headers = {"x-forwarded-for": forwarded_for} if forwarded_for else {}
    nonce = csrf_of(client.get("/login", headers=headers).text)
    data = {"csrf": nonce, "token": token, "next": next_path}
    return client.post("/login", data=data, headers=headers)


def write_console_skills(skills: Path, personas: Path) -> None:
    for name, skill_class in CONSOLE_SKILLS.items():
        if name == "gated_wait":
            write_skill(
                skills,
                name,
                GATED,
                description="Waits for a gate file to appear, then says so.",
                schema=GATED_SCHEMA,
                category="testing",
                timeout_seconds=60,
            )
        elif name == "odd_text":
            write_skill(
                skills,
                name,
                description=ODD_TEXT,
                category="testing",
                sandbox={"profile": "strict", "write": ["/var/tmp"]},
            )
        else:
            write_skill(
                skills,
                name,
                description=f"A {skill_class} test skill of the console.",
                category="testing",
                **{"class": skill_class},
            )
    write_persona(personas, "reader", "read-only", tools=["host_info", "port_check", "log_grep"])
    write_persona(personas, "responder", "mutating-with-confirm")


@contextmanager
def console_server(
    base: Path,
    *,
    example_skills: bool = True,
    more_skills: Callable[[Path], None] | None = None,
    **overrides: Any,
) -> Iterator[Console]:
    """The composed app under uvicorn on a loopback port, in a thread of this process
    (without the repository's example skills when ``example_skills`` is false: the example
    pack brings copies of them; ``more_skills`` writes a test's own skills into the folder)."""
    skills = base / "skills"
    skills.mkdir()
    write_console_skills(skills, base / "personas")
    if more_skills is not None:
        more_skills(skills)
    dirs = (str(EXAMPLE_SKILLS), str(skills)) if example_skills else (str(skills),)
    settings = make_settings(base, skills, external_dirs=dirs, **overrides)
    store = open_store(
        settings.data_dir,
        settings.database_url,
        audit_key_file=settings.audit_key_file,
        audit_sink=settings.audit_sink,
    )
    tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    app = create_app(settings, store=store, loader_sink=lambda _line: None)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(  # as serve configures it
        app,
        log_level="warning",
        http="h11",
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        lifespan="on",
        **proxy_options(settings.trusted_proxies),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()

    def started() -> bool:
        assert thread.is_alive() or server.started, "the console server stopped while starting"
        return server.started

    try:
        wait_for(started, "the console server to start", 30)
        yield Console(f"http://127.0.0.1:{port}", store, settings, app, tokens)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        store.close()


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """One served console per test module (see :func:`console_server`)."""
    with console_server(tmp_path_factory.mktemp("console")) as served:
        yield served


# ---- the browser --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium. Not starting is a failure: the browser tests must run everywhere.

    One per test module, not per session: while Playwright's sync API is open, its event loop
    counts as running in the main thread, and every later test calling ``asyncio.run`` would
    fail."""
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
        except Exception as exc:
            pytest.fail(
                f"Chromium did not start from {CHROMIUM} ({exc}); install the Debian package "
                "chromium (`.ci/run` does when it is missing)",
                pytrace=False,
            )
        try:
            yield launched
        finally:
            launched.close()


#: Reports Content-Security-Policy violations as console errors, so the watch below sees them
#: even when the browser would report them elsewhere. Injected by the driver (CSP does not
#: apply to it), before any script of the page.
REPORT_CSP = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`CSP violation: ${event.violatedDirective} blocked ${event.blockedURI || "inline"}`
    + ` at ${event.sourceFile || "?"}:${event.lineNumber}`);
});
"""


class PageGuard:
    """What went wrong on a page: console errors, uncaught errors, CSP violations."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.expected: list[str] = []

    def console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "assert"):
            self.problems.append(f"console {message.type}: {message.text}")

    def page_error(self, error: Any) -> None:
        self.problems.append(f"uncaught: {error}")

    def expect(self, fragment: str) -> None:
        """Accept problems containing ``fragment`` (say, the 403 a test provoked)."""
        self.expected.append(fragment)

    def unexpected(self) -> list[str]:
        return [p for p in self.problems if not any(f in p for f in self.expected)]

    def violations(self) -> list[str]:
        return [p for p in self.problems if "CSP violation" in p or "Content Security" in p]


def watched_page(browser: Browser, guard: PageGuard, **context_kw: Any) -> Page:
    """A page in a fresh context whose problems go to ``guard``."""
    context = browser.new_context(viewport=context_kw.pop("viewport", DESKTOP), **context_kw)
    context.add_init_script(REPORT_CSP)
    page = context.new_page()
    page.on("console", guard.console)
    page.on("pageerror", guard.page_error)
    return page


@pytest.fixture
def page_guard() -> PageGuard:
    return PageGuard()


@pytest.fixture
def page(browser: Browser, page_guard: PageGuard) -> Iterator[Page]:
    """A 1280×800 page in its own context; its console must stay clean (see PageGuard)."""
    opened = watched_page(browser, page_guard)
    try:
        yield opened
    finally:
        opened.context.close()
    problems = page_guard.unexpected()
    assert not problems, "the page reported problems:\n" + "\n".join(problems)


def login(page: Page, console: Console, who: str = "admin", then: str = "/skills") -> None:
    """Log ``page`` in as ``who`` through the login form, with the keyboard, and land on
    ``then`` (the page a link to the console would have asked for; without one, login lands
    on the home page)."""
    page.goto(console.url + "/login?" + urlencode({"next": then}))
    page.fill("#token", console.tokens[who])
    page.press("#token", "Enter")
    page.wait_for_url(console.url + then)


def screenshot(page: Page, name: str, full_page: bool = False, height: int | None = None) -> Path:
    """A PNG of the page in tests/.screenshots/ (git-ignored), for people to look at; with
    ``height``, the top of the whole page down to that many pixels."""
    SCREENSHOTS.mkdir(exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if height is not None:
        width = page.viewport_size["width"] if page.viewport_size else DESKTOP["width"]
        clip = {"x": 0, "y": 0, "width": width, "height": height}
        page.screenshot(path=str(path), full_page=True, clip=clip)  # type: ignore[arg-type]
    else:
        page.screenshot(path=str(path), full_page=full_page)
    return path
