"""Running code as an unprivileged user: root bypasses file permissions, so an unreadable
folder is only unreadable to someone else (the ``nobody`` user here).

``run_unprivileged`` forks a child that drops to ``nobody`` and runs already-imported code (no
interpreter of its own: the venv's Python may live under a home directory nobody cannot enter);
``world_readable_dir`` is a fresh dir under /tmp that ``nobody`` can enter (tmp_path may not be).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534


def run_unprivileged(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a forked child that dropped root to nobody; return its JSON result.

    Root bypasses directory permissions, so an unreadable folder is only unreadable to an
    unprivileged user. The child runs the already-imported loader: no interpreter of its own
    is needed (the venv's Python may live under a home directory nobody cannot enter).
    """
    if os.geteuid() != 0:
        return fn()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            payload = json.dumps({"ok": fn()})
        except BaseException as exc:
            payload = json.dumps({"error": f"{type(exc).__name__}: {exc}"})
            status = 1
        finally:
            try:
                os.write(write_end, payload.encode())
            finally:
                os._exit(status)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks) or b'{"error": "no output"}')
    if "error" in result:
        if result["error"].startswith("PermissionError"):
            pytest.skip(f"cannot drop privileges to uid {NOBODY}: {result['error']}")
        raise AssertionError(f"unprivileged child failed: {result['error']}")
    return result["ok"]


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A fresh dir under /tmp that an unprivileged user can enter (tmp_path may not be)."""
    base = tempfile.mkdtemp(dir="/tmp", prefix="ongrid-unreadable-")
    os.chmod(base, 0o755)
    yield Path(base)
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(base)
