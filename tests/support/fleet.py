"""Edge workers under test: real `ongrid-skills worker` processes on the suite's NATS server.

`fleet` (a fixture) gives a :class:`Fleet`: the manager's settings for this test's own prefix on
the session NATS server (:mod:`tests.support.nats`), with a short heartbeat TTL (:data:`TTL`),
the manager's signing key created in its data dir and written to the workers' trusted keys file,
and :meth:`Fleet.worker` to start a worker process on a skills dir of its own (a data dir of its
own: as on another host), whose own key is created first and trusted for its host id in the
manager's ``ONGRID_FLEET_WORKER_KEYS`` (:attr:`Fleet.worker_keys`; ``trusted=False``: not).
Every worker it starts is killed at the end of the test.

`host_skill` writes a host-scoped skill.json whose script runs ``body`` (sh) after reading its
args; the same text written on two hosts is the same definition.

The bus as any party on it sees it: :func:`publish` (a message into JetStream), :class:`Spy`
(copies of what is published on a subject), :func:`read_entry` (a host's entry of the hosts
bucket) and :class:`Forger` (entries of its own written into the bucket, again and again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import pytest

from ongrid_skills.fleet import bus
from ongrid_skills.fleet.attest import key_line, worker_key
from ongrid_skills.fleet.bus import Names
from ongrid_skills.fleet.signing import manager_key
from ongrid_skills.settings import Settings
from tests.support.nats import NatsServer, running_nats
from tests.support.processes import CLI
from tests.support.server import Server, make_settings, running_app
from tests.support.skills import write_skill
from tests.support.waiting import wait_for

#: Seconds a worker's heartbeat lasts in these tests (default: 15).
TTL = 2
ANNOUNCED = "host skill(s) announced"


def host_skill(root: Path, name: str, body: str, **manifest: Any) -> Path:
    """A ``scope: host`` skill whose script reads its args into $ARGS, then runs ``body``."""
    script = f"#!/bin/sh\nARGS=$(cat)\n{body}\n"
    manifest.setdefault("scope", "host")
    return write_skill(root, name, script, **manifest)


@dataclass
class WorkerProcess:
    """One running worker, and its log (stderr) in a file."""

    host: str
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_line(self, needle: str, timeout: float = 20, count: int = 1) -> str:
        def seen() -> bool:
            if self.proc.poll() is not None and self.text().count(needle) < count:
                raise AssertionError(f"worker {self.host} exited:\n{self.text()}")
            return self.text().count(needle) >= count

        wait_for(seen, f"worker {self.host} to log {needle!r}", timeout)
        return self.text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Fleet:
    """A manager's settings on a fresh prefix, and the workers of this test."""

    root: Path
    nats: NatsServer
    prefix: str
    keys: Path
    settings: Settings
    workers: list[WorkerProcess] = field(default_factory=list)

    def worker_env(self, **env: str) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "ONGRID_NATS_URL": self.nats.url,
            "ONGRID_FLEET_PREFIX": self.prefix,
            "ONGRID_FLEET_TTL_SECONDS": str(TTL),
            "ONGRID_FLEET_MANAGER_KEYS": str(self.keys),
            "ONGRID_BUNDLED_SKILLS": "0",
            **env,
        }

    def worker(
        self,
        host: str,
        skills: Path,
        *labels: str,
        wait: bool = True,
        inside: Sequence[str] = (),
        trusted: bool = True,
        **env: str,
    ) -> WorkerProcess:
        """Start ``ongrid-skills worker --host-id host`` on ``skills``; wait for its announce.

        ``inside``: the command the worker runs under, which must exec it (its pid is the
        worker's): ``ip netns exec NS`` (:mod:`tests.support.netns`)."""
        data = self.root / f"worker-{host}"
        data.mkdir(exist_ok=True)
        if trusted:
            self.trust(host, data)
        log = data / "worker.log"
        before = log.read_text(errors="replace").count(ANNOUNCED) if log.exists() else 0
        argv = [*inside, CLI, "worker", "--host-id", host]
        for label in labels:
            argv += ["--label", label]
        environ = self.worker_env(
            ONGRID_DATA_DIR=str(data), ONGRID_SKILLS_EXTERNAL_DIRS=str(skills), **env
        )
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environ
            )
        worker = WorkerProcess(host, proc, log, data)
        self.workers.append(worker)
        if wait:
            worker.wait_line(ANNOUNCED, count=before + 1)  # a restarted worker appends
        return worker

    def trust(self, host: str, data: Path) -> None:
        """Trust the key of the worker whose data dir is ``data`` for ``host`` (the line
        ``ongrid-skills worker --print-key`` prints), as an operator appends it."""
        line = key_line(host, worker_key(Settings(data_dir=str(data))))
        with self.worker_keys.open("a") as out:
            out.write(line + "\n")
        self.worker_keys.chmod(0o600)  # a key file group or others may read is refused

    @property
    def worker_keys(self) -> Path:
        """The manager's ``ONGRID_FLEET_WORKER_KEYS``: each worker started here is trusted."""
        return self.root / "workers.pub"

    def manager_env(self, skills_root: Path, **env: str) -> dict[str, str]:
        """The environment of a ``serve`` process managing this fleet."""
        return {
            "ONGRID_NATS_URL": self.nats.url,
            "ONGRID_FLEET_PREFIX": self.prefix,
            "ONGRID_FLEET_TTL_SECONDS": str(TTL),
            "ONGRID_FLEET_WORKER_KEYS": str(self.worker_keys),
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root),
            **env,
        }

    def manager_settings(self, skills_root: Path, **overrides: Any) -> Settings:
        fields: dict[str, Any] = {
            "data_dir": self.settings.data_dir,
            "nats_url": self.nats.url,
            "fleet_prefix": self.prefix,
            "fleet_ttl_seconds": TTL,
            "fleet_worker_keys": str(self.worker_keys),
        }
        return make_settings(self.root, skills_root, **{**fields, **overrides})


def offered_names(server: Server) -> list[str]:
    """The names of the skills ``server`` offers (as the viewer ``vera``)."""
    return [s["name"] for s in server.call("GET", "/v1/skills", "vera").json()["items"]]


@contextmanager
def serving_manager(fleet: Fleet, skills_root: Path, host_skill: str) -> Iterator[Server]:
    """The fleet's manager served, once it offers the workers' ``host_skill``."""
    with running_app(fleet.manager_settings(skills_root)) as server:
        wait_for(lambda: host_skill in offered_names(server), "the host skill to be offered")
        yield server


@pytest.fixture
def fleet(tmp_path: Path, nats_server: NatsServer, fleet_prefix: str) -> Iterator[Fleet]:
    """This test's fleet on the session NATS server; its workers are stopped at the end."""
    with fleet_on(tmp_path, nats_server, fleet_prefix) as group:
        yield group


@pytest.fixture
def private_fleet(tmp_path: Path, fleet_prefix: str) -> Iterator[Fleet]:
    """A fleet on a NATS server of this test's own (to restart or kill it)."""
    with running_nats() as server, fleet_on(tmp_path, server, fleet_prefix) as group:
        yield group


@contextmanager
def fleet_on(tmp_path: Path, nats_server: NatsServer, fleet_prefix: str) -> Iterator[Fleet]:
    settings = make_settings(
        tmp_path,
        tmp_path / "manager-skills",
        data_dir=str(tmp_path / "manager"),
        nats_url=nats_server.url,
        fleet_prefix=fleet_prefix,
        fleet_ttl_seconds=TTL,
        fleet_worker_keys=str(tmp_path / "workers.pub"),
    )
    key = manager_key(settings)
    keys = tmp_path / "managers.pub"
    keys.write_text(key.public_line + " test-manager\n")
    keys.chmod(0o600)  # a key file group or others may read is refused
    group = Fleet(tmp_path, nats_server, fleet_prefix, keys, settings)
    group.worker_keys.touch(0o600)  # no worker trusted yet: each is as it starts
    try:
        yield group
    finally:
        for worker in group.workers:
            worker.stop(signal.SIGKILL)


async def _publish(url: str, subject: str, body: bytes, headers: dict[str, str] | None) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().publish(subject, body, headers=headers)
    finally:
        await nc.close()


def publish(url: str, subject: str, body: bytes, headers: dict[str, str] | None = None) -> None:
    """Publish one message into JetStream as any party on the bus could."""
    asyncio.run(_publish(url, subject, body, headers))


@dataclass(frozen=True)
class Consumer:
    """What the NATS server says of a host's calls consumer."""

    waiting: int  # pull requests waiting for a message
    delivered: int  # the stream sequence of the last call delivered to it (0: none)
    unacknowledged: int


async def _consumer(url: str, prefix: str, host: str) -> Consumer:
    names = Names(prefix)
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().consumer_info(names.calls_stream, names.worker_consumer(host))
    finally:
        await nc.close()
    return Consumer(
        info.num_waiting or 0,
        info.delivered.stream_seq if info.delivered else 0,
        info.num_ack_pending or 0,
    )


def consumer(url: str, prefix: str, host: str) -> Consumer:
    """The state of ``host``'s calls consumer, as the server has it now."""
    return asyncio.run(_consumer(url, prefix, host))


class Spy:
    """Copies of what is published on a subject (core NATS: any party on the bus can read)."""

    def __init__(self, url: str, subject: str) -> None:
        self.messages: list[tuple[bytes, dict[str, str]]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, args=(url, subject), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the spy did not subscribe"

    def _run(self, url: str, subject: str) -> None:
        self._loop.run_until_complete(self._main(url, subject))

    async def _main(self, url: str, subject: str) -> None:
        self._stop = asyncio.Event()
        nc = await nats.connect(url)

        async def heard(msg: Any) -> None:
            self.messages.append((msg.data, dict(msg.headers or {})))

        await nc.subscribe(subject, cb=heard)
        await nc.flush()
        self._ready.set()
        await self._stop.wait()
        await nc.close()

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()


async def _read_entry(url: str, prefix: str, key: str) -> bytes:
    nc = await nats.connect(url)
    try:
        kv = await nc.jetstream().key_value(Names(prefix).hosts_bucket)
        entry = await kv.get(key)
        assert entry.value is not None
        return entry.value
    finally:
        await nc.close()


def read_entry(url: str, prefix: str, key: str) -> bytes:
    """The value of a host's entry in the hosts bucket, as any party on the bus can read it."""
    return asyncio.run(_read_entry(url, prefix, key))


class Forger:
    """A party that may write the hosts bucket: puts each of its entries again every ``period``
    seconds (as a heartbeat would: entries expire after the TTL) until :meth:`close`."""

    def __init__(self, url: str, prefix: str, period: float = 0.2) -> None:
        self.entries: dict[str, bytes] = {}
        self.writes = 0
        self._period = period
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, args=(url, prefix), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the forger did not connect"

    def write(self, key: str, value: bytes) -> None:
        """Put ``value`` under ``key`` from now on (at once, then every period)."""
        self.entries[key] = value
        written = self.writes
        wait_for(lambda: self.writes > written + len(self.entries), f"{key} to be written")

    def _run(self, url: str, prefix: str) -> None:
        self._loop.run_until_complete(self._main(url, prefix))

    async def _main(self, url: str, prefix: str) -> None:
        self._stop = asyncio.Event()
        nc = await nats.connect(url)
        kv = await bus.ensure(nc.jetstream(), Names(prefix), TTL)
        self._ready.set()
        while not self._stop.is_set():
            for key, value in list(self.entries.items()):
                await kv.put(key, value)
                self.writes += 1
            self.writes += 1  # a round ended (also when there is nothing to write yet)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._period)
        await nc.close()

    def close(self) -> None:
        """Stop writing (the entries stay until someone overwrites them or they expire)."""
        if self._loop.is_closed():
            return
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._loop.close()
