"""Helpers for server tests: an app on a real store, tokens per role, a real `serve` process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from ongrid_skills.doors.asgi import create_app
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from ongrid_skills.types import Role
from tests.support import venv_bin

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


def make_settings(tmp_path: Path, skills_root: Path, **overrides: Any) -> Settings:
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServeProcess:
    proc: subprocess.Popen[str]
    url: str
    token: str
    data_dir: Path


def start_serve(data_dir: Path, env: dict[str, str], deadline: float = 30) -> ServeProcess:
    """Start `ongrid-skills serve` on a free port; wait until /v1/health answers."""
    port = free_port()
    environ = {
        "PATH": os.environ["PATH"],
        "ONGRID_DATA_DIR": str(data_dir),
        "ONGRID_BUNDLED_SKILLS": "0",
        **env,
    }
    proc = subprocess.Popen(
        [venv_bin("ongrid-skills"), "-q", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environ,
    )
    url = f"http://127.0.0.1:{port}"
    token = ""
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "serving on ..."
    assert "serving on" in line, line
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if httpx.get(f"{url}/v1/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            if proc.poll() is not None:
                raise RuntimeError("serve exited early") from None
            time.sleep(0.05)
    return ServeProcess(proc, url, token, data_dir)


def stop(process: ServeProcess, sig: int = signal.SIGTERM) -> None:
    if process.proc.poll() is None:
        process.proc.send_signal(sig)
        try:
            process.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.proc.kill()
            process.proc.wait()
    if process.proc.stdout is not None:
        process.proc.stdout.close()
