"""Replicas under test: real `ongrid-skills serve` processes sharing one PostgreSQL database.

`replicas` (a fixture) gives a :class:`ReplicaSet` on a fresh database of the suite's server
(:mod:`tests.support.postgres`): one audit key file and one skills root for all, a data dir of its
own for each replica (as on separate hosts), a short lease TTL (:data:`LEASE_TTL`), and tokens
made once in the shared store: ``olga`` and ``oscar`` (operators), ``admin`` and ``admin2``,
``vera`` (viewer). Every process it starts is stopped at the end of the test.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.execution.records import Status
from ongrid_skills.store import Store, open_store
from tests.support.server import (
    ROLES,
    Launched,
    ServeProcess,
    answering,
    launch_serve,
    stop,
    stop_all,
)
from tests.support.waiting import wait_for

#: Seconds a replica's lease lasts without a heartbeat, in these tests (default: 30).
LEASE_TTL = 2


@dataclass
class Replica:
    """One running replica and an HTTP client for it, one token per principal."""

    name: str
    serve: ServeProcess
    tokens: dict[str, str]

    def call(self, method: str, path: str, who: str = "admin", **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, self.serve.url + path, headers=headers, timeout=30, **kw)

    def execution(self, execution_id: str) -> dict[str, Any]:
        response = self.call("GET", f"/v1/executions/{execution_id}", "vera")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def final(self, execution_id: str, timeout: float = 20) -> dict[str, Any]:
        """The execution once it reached a final status."""

        def finished() -> dict[str, Any] | None:
            body = self.execution(execution_id)
            return body if Status(body["status"]).final else None

        return wait_for(finished, f"execution {execution_id} to finish", timeout)

    def kill(self) -> None:
        """kill -9, and wait for the process to be gone."""
        stop(self.serve, signal.SIGKILL)


@dataclass
class ReplicaSet:
    """Replicas of one database: start them by name; ``store()`` opens the database here."""

    root: Path
    url: str
    skills: Path
    key: Path
    tokens: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)
    started: list[Replica] = field(default_factory=list)

    def start(self, name: str, **env: str) -> Replica:
        (replica,) = self.start_all(name, **env)
        return replica

    def start_all(self, *names: str, **env: str) -> list[Replica]:
        """Start a replica per name, side by side (each pays its interpreter's start-up at
        the same time), and return them once each answers."""
        environ = {
            "ONGRID_DATABASE_URL": self.url,
            "ONGRID_AUDIT_KEY_FILE": str(self.key),
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(self.skills),
            "ONGRID_REPLICA_LEASE_TTL_SECONDS": str(LEASE_TTL),
            **self.env,
            **env,
        }
        launched: list[Launched] = [launch_serve(self.root / name, environ) for name in names]
        ready: list[Replica] = []
        try:
            for name, process in zip(names, launched, strict=True):
                ready.append(Replica(name, answering(process), self.tokens))
        finally:
            self.started += ready
            for process in launched[len(ready) :]:  # one did not come up: the rest go too
                process.proc.kill()
                process.proc.wait()
                if process.proc.stdout is not None:
                    process.proc.stdout.close()
        return ready

    def store(self) -> closing[Store]:
        """The shared store, opened in the test process (closed by the ``with``)."""
        return closing(open_store(str(self.root / "test"), self.url, audit_key_file=str(self.key)))


@pytest.fixture
def replicas(tmp_path: Path, skills_root: Path, pg_url: str) -> Iterator[ReplicaSet]:
    """A set of replicas on a fresh PostgreSQL database; all stopped after the test."""
    key = tmp_path / "audit.key"
    key.write_text("5e" * 32 + "\n")
    key.chmod(0o600)
    store = open_store(str(tmp_path / "test"), pg_url, audit_key_file=str(key))
    try:
        tokens = {name: store.tokens.create(name, role)[0] for name, role in ROLES.items()}
    finally:
        store.close()
    fleet = ReplicaSet(tmp_path, pg_url, skills_root, key, tokens)
    try:
        yield fleet
    finally:
        stop_all([replica.serve for replica in fleet.started])
