"""The server under test, two ways: the composed ASGI app on a real store behind Starlette's
TestClient (the `server` fixture), and a real `ongrid-skills serve` process on a free loopback port
(:func:`start_serve`). Tokens exist for every role: ``admin``, ``admin2``, ``olga`` and ``oscar``
(operators), ``vera`` (viewer).

The `server` fixture loads whatever the test module wrote before it starts: a module overrides
`server_skills` to write its skills (and returns what its tests want to see of them),
`server_settings` to aim the server elsewhere (an LLM, other dirs), and `server_checks` to assert
what must still hold once each test is done.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.execution.records import Status
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from ongrid_skills.types import Role
from tests.support.processes import CLI
from tests.support.sockets import free_port
from tests.support.store import migrated_data_dir
from tests.support.waiting import wait_for

ROLES = {
    "admin": Role.ADMIN,
    "admin2": Role.ADMIN,
    "olga": Role.OPERATOR,
    "oscar": Role.OPERATOR,
    "vera": Role.VIEWER,
}


@dataclass
class Server:
    """A TestClient over a real app, store and skills root; ``as_(name)`` gives auth headers."""

    client: TestClient
    store: Store
    settings: Settings
    tokens: dict[str, str] = field(default_factory=dict)

    def as_(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    def call(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        return self.client.request(method, path, headers=self.as_(who), **kw)

    @property
    def manager(self) -> Any:
        return self.client.app.state.manager  # type: ignore[attr-defined]

    def final(self, execution_id: str, who: str = "vera", timeout: float = 20) -> dict[str, Any]:
        """``GET /v1/executions/{id}`` once the execution reached a final status."""

        def finished() -> dict[str, Any] | None:
            body: dict[str, Any] = self.call("GET", f"/v1/executions/{execution_id}", who).json()
            return body if Status(body["status"]).final else None

        return wait_for(finished, f"execution {execution_id} to finish", timeout)


def make_settings(tmp_path: Path, skills_root: Path, **overrides: Any) -> Settings:
    """Settings on ``skills_root``, ``tmp_path/personas`` and ``tmp_path/data``, no bundled
    catalogue; ``overrides`` replace any of them."""
    personas = tmp_path / "personas"
    personas.mkdir(exist_ok=True)
    base: dict[str, Any] = {
        "external_dirs": (str(skills_root),),
        "persona_dirs": (str(personas),),
        "data_dir": str(tmp_path / "data"),
        "bundled_skills": False,
    }
    base.update(overrides)
    return Settings(**base)


@contextmanager
def running_app(settings: Settings, **app_kw: Any) -> Iterator[Server]:
    """The composed app (REST + MCP) on a fresh store with one token per name of ROLES."""
    migrated_data_dir(settings.data_dir, settings.database_url)
    store = open_store(
        settings.data_dir,
        settings.database_url,
        audit_key_file=settings.audit_key_file,
        audit_sink=settings.audit_sink,
    )
    tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    app = create_app(settings, store=store, loader_sink=lambda _line: None, **app_kw)
    try:
        with TestClient(app) as client:
            yield Server(client, store, settings, tokens)
    finally:
        store.close()


@pytest.fixture
def server_skills() -> Any:
    """What the server loads besides an empty skills root: override it in a module to write
    skills (with `make_skill`) before the server starts."""
    return None


@pytest.fixture
def server_settings(tmp_path: Path, skills_root: Path, server_skills: Any) -> Settings:
    """The settings the `server` fixture starts with; override it to change them."""
    return make_settings(tmp_path, skills_root)


ServerCheck = Callable[[Server], None]


@pytest.fixture
def server_checks() -> list[ServerCheck]:
    """What must still hold of the server once a test is done with it: override it in a module
    (e.g. "it still answers and its audit chain verifies")."""
    return []


@pytest.fixture
def server(server_settings: Settings, server_checks: list[ServerCheck]) -> Iterator[Server]:
    """The app on a real store, behind a TestClient, for one test."""
    with running_app(server_settings) as app:
        yield app
        for check in server_checks:
            check(app)


@dataclass
class ServeProcess:
    """A running `ongrid-skills serve`, with the lines it printed on start-up."""

    proc: subprocess.Popen[str]
    url: str
    data_dir: Path
    lines: list[str] = field(default_factory=list)


@dataclass
class Launched:
    """A `serve` process started, not yet known to answer (see :func:`launch_serve`)."""

    proc: subprocess.Popen[str]
    url: str
    data_dir: Path


def launch_serve(data_dir: Path, env: dict[str, str]) -> Launched:
    """Start `ongrid-skills serve` on a free port without waiting for it: several processes
    launched before :func:`answering` is awaited on each start side by side."""
    port = free_port()
    environ = {
        "PATH": os.environ["PATH"],
        "ONGRID_DATA_DIR": str(data_dir),
        "ONGRID_BUNDLED_SKILLS": "0",
        **env,
    }
    proc = subprocess.Popen(
        [CLI, "-q", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environ,
    )
    return Launched(proc, f"http://127.0.0.1:{port}", data_dir)


def answering(launched: Launched, *, startup_lines: int = 1, timeout: float = 30) -> ServeProcess:
    """Read the first ``startup_lines`` lines a launched `serve` prints ("serving on …", and
    the admin token on a fresh data dir), then wait until /v1/health answers."""
    proc, url = launched.proc, launched.url
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(startup_lines)]
    assert "serving on" in lines[0], lines

    def health() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited with {proc.returncode}: {lines}")
        try:
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(health, "serve to answer /v1/health", timeout)
    return ServeProcess(proc, url, launched.data_dir, lines)


def start_serve(
    data_dir: Path, env: dict[str, str], *, startup_lines: int = 1, timeout: float = 30
) -> ServeProcess:
    """Start `ongrid-skills serve` on a free port, read its first ``startup_lines`` lines
    ("serving on …", and the admin token on a fresh data dir), wait until /v1/health answers."""
    return answering(launch_serve(data_dir, env), startup_lines=startup_lines, timeout=timeout)


def stop(process: ServeProcess, sig: int = signal.SIGTERM) -> str:
    """Signal the process, wait for it (killing it after 15 s), and return what it printed
    after its start-up lines."""
    (said,) = stop_all([process], sig)
    return said


def stop_all(processes: list[ServeProcess], sig: int = signal.SIGTERM) -> list[str]:
    """:func:`stop` for several processes, signalled all at once (so they stop side by side)."""
    for process in processes:
        if process.proc.poll() is None:
            process.proc.send_signal(sig)
    return [_ended(process) for process in processes]


def _ended(process: ServeProcess) -> str:
    try:
        process.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.proc.kill()
        process.proc.wait()
    if process.proc.stdout is None or process.proc.stdout.closed:  # stopped before
        return ""
    rest = process.proc.stdout.read()
    process.proc.stdout.close()
    return rest
