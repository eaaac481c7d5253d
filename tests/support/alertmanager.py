"""A real Prometheus Alertmanager (Debian's ``prometheus-alertmanager``; ``.ci/run`` installs
it) on a free loopback port, clustering off, its storage in a temp dir.

:func:`running_alertmanager` starts one with a configuration text; :meth:`Alertmanager.post`
sends alerts to its API (``POST /api/v2/alerts``), so what reaches a webhook receiver is
Alertmanager's own payload; :meth:`Alertmanager.reconfigure` writes a new configuration and
reloads it (``POST /-/reload``), so one server serves a whole test module. A binary that is
missing FAILS the tests that need it, never skips them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.sockets import free_port
from tests.support.waiting import wait_for

CANDIDATES = ("/usr/bin/prometheus-alertmanager", "/usr/bin/alertmanager")


def alertmanager_binary() -> str:
    for name in ("prometheus-alertmanager", "alertmanager"):
        found = shutil.which(name)
        if found:
            return found
    for path in CANDIDATES:
        if os.access(path, os.X_OK):
            return path
    pytest.fail(
        "prometheus-alertmanager is not installed: apt-get install prometheus-alertmanager "
        "(.ci/run does it)"
    )


def webhook_config(url: str, *, bearer: str | None = None, basic: str | None = None) -> str:
    """A configuration routing every alert, grouped by alertname and instance, to ``url``,
    resolved notifications included, after a short group_wait."""
    auth = ""
    if bearer is not None:
        auth = f"    http_config:\n      authorization:\n        credentials: '{bearer}'\n"
    elif basic is not None:
        auth = (
            "    http_config:\n      basic_auth:\n        username: alertmanager\n"
            f"        password: '{basic}'\n"
        )
    return (
        "route:\n"
        "  receiver: ongrid\n"
        "  group_by: [alertname, instance]\n"
        "  group_wait: 100ms\n"
        "  group_interval: 1s\n"
        "  repeat_interval: 1h\n"
        "receivers:\n"
        "- name: ongrid\n"
        "  webhook_configs:\n"
        f"  - url: '{url}'\n"
        "    send_resolved: true\n"
        f"{auth}"
    )


@dataclass
class Alertmanager:
    root: Path
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def post(self, *alerts: dict[str, Any]) -> None:
        """Alerts to its API: each ``labels``, ``annotations``, optional ``startsAt``/``endsAt``."""
        answer = httpx.post(f"{self.url}/api/v2/alerts", json=list(alerts), timeout=10)
        assert answer.status_code == 200, answer.text

    def reconfigure(self, config: str) -> None:
        (self.root / "alertmanager.yml").write_text(config)
        answer = httpx.post(f"{self.url}/-/reload", timeout=10)
        assert answer.status_code == 200, answer.text


@contextmanager
def running_alertmanager(root: Path, config: str) -> Iterator[Alertmanager]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "alertmanager.yml").write_text(config)
    port = free_port()
    argv = [
        alertmanager_binary(),
        f"--config.file={root / 'alertmanager.yml'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
        f"--storage.path={root / 'data'}",
        "--log.level=warn",
    ]
    log = (root / "alertmanager.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    server = Alertmanager(root, port, proc)

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"alertmanager exited: {(root / 'alertmanager.log').read_text()}")
        try:
            return httpx.get(f"{server.url}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(ready, "alertmanager to be ready", 20)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
