"""Which client address a real ``ongrid-skills serve`` sees behind proxy headers: the peer's,
unless the peer is listed in ``ONGRID_TRUSTED_PROXIES`` (uvicorn trusts 127.0.0.1 by default;
serve must not)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ongrid_skills.doors.web.throttle import MAX_FAILURES
from ongrid_skills.store import open_store
from tests.support.browser import csrf_of
from tests.support.processes import CLI
from tests.support.server import ServeProcess, start_serve, stop
from tests.support.sockets import free_port


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    started: list[ServeProcess] = []

    def start(**env: str) -> ServeProcess:
        data = tmp_path / f"data{len(started)}"
        process = start_serve(data, env, startup_lines=2)
        started.append(process)
        return process

    yield start
    for process in started:
        stop(process)


def failed_login(client: httpx.Client, forwarded_for: str) -> httpx.Response:
    """A login with a wrong token through the form, sent with ``X-Forwarded-For``."""
    nonce = csrf_of(client.get("/login").text)
    return client.post(
        "/login",
        data={"csrf": nonce, "token": "ogs_" + "w" * 43},
        headers={"x-forwarded-for": forwarded_for},
    )


def refused_clients(process: ServeProcess) -> list[str]:
    stop(process)
    store = open_store(str(process.data_dir))
    try:
        entries = store.audit.entries(limit=1000, action="session.refused")
    finally:
        store.close()
    return [entry["data"]["client"] for entry in entries]


def test_a_loopback_client_rotating_x_forwarded_for_is_still_throttled_and_audited_as_itself(
    serving: Any,
) -> None:
    process = serving()
    with httpx.Client(base_url=process.url, timeout=15) as client:
        answers = [
            failed_login(client, f"198.51.100.{n}").status_code for n in range(MAX_FAILURES + 1)
        ]
    assert answers == [401] * MAX_FAILURES + [429]
    assert refused_clients(process) == ["127.0.0.1"] * MAX_FAILURES


def test_behind_a_listed_proxy_the_right_most_untrusted_forwarded_address_is_the_client(
    serving: Any,
) -> None:
    process = serving(ONGRID_TRUSTED_PROXIES="127.0.0.1, 10.0.0.0/8")
    with httpx.Client(base_url=process.url, timeout=15) as client:
        # A client's own made-up entry first, then what the proxies appended.
        chain = "192.0.2.66, 203.0.113.7, 10.1.2.3"
        answers = [failed_login(client, chain).status_code for _ in range(MAX_FAILURES + 1)]
        other = failed_login(client, "203.0.113.8").status_code
    assert answers == [401] * MAX_FAILURES + [429]
    assert other == 401  # another client behind the same proxy is not blocked
    assert refused_clients(process) == ["203.0.113.8"] + ["203.0.113.7"] * MAX_FAILURES


def test_serve_refuses_a_trusted_proxy_that_is_not_an_address_or_a_network(
    tmp_path: Path,
) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_TRUSTED_PROXIES": "127.0.0.1 proxy.example",
    }
    done = subprocess.run(
        [CLI, "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "trusted_proxies: 'proxy.example' is not an IP address or network" in done.stderr
    assert "serving on" not in done.stdout
