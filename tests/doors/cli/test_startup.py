"""The start-up of the long-running commands runs no full collection: the collector waits until
the server stack is imported and the app built, then that heap is frozen (see
ongrid_skills.doors.cli.startup). Before, ``serve`` and ``mcp`` each ran three full passes
over a growing heap while starting (0.2 s of serve's 1.4 s)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ongrid_skills.doors.cli.startup import starting
from tests.support.sockets import free_port
from tests.support.waiting import wait_for

#: The console script's entry point, counting the collections of each generation until exit.
COUNTING = """
import atexit, gc, sys
counts = [0, 0, 0]

def count(phase, info):
    if phase == "stop":
        counts[info["generation"]] += 1

gc.callbacks.append(count)
atexit.register(lambda: print("full collections:", counts[2], flush=True))
from ongrid_skills.doors.cli.main import main
sys.argv[0] = "ongrid-skills"
sys.exit(main())
"""


def full_collections(said: str) -> int:
    return int(said.rsplit("full collections:", 1)[1].split(maxsplit=1)[0])


def environ(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
    }


def test_nothing_is_collected_while_starting_and_what_was_built_is_frozen_after() -> None:
    gc.collect()  # what earlier tests left is not frozen with the rest
    frozen = gc.get_freeze_count()
    with starting():
        assert not gc.isenabled()
        built = [[n] for n in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(built)


def test_collection_is_on_again_when_a_start_up_fails() -> None:
    with pytest.raises(RuntimeError), starting():
        raise RuntimeError("cannot listen")
    assert gc.isenabled()


def test_mcp_starts_and_ends_without_a_full_collection(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", COUNTING, "-q", "mcp"],
        stdin=subprocess.DEVNULL,  # the client is gone at once: it starts, then ends
        capture_output=True,
        text=True,
        env=environ(tmp_path),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert full_collections(done.stdout) <= 1, done.stdout  # three before


def test_serve_starts_answers_and_stops_without_a_full_collection(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", COUNTING, "-q", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=environ(tmp_path),
    )
    try:

        def answering() -> bool:
            assert proc.poll() is None, "serve exited"
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).is_success
            except httpx.HTTPError:
                return False

        wait_for(answering, "serve to answer /v1/health", 30)
        proc.send_signal(signal.SIGTERM)
        said, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert full_collections(said) <= 1, said  # three before
