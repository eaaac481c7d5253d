"""A full disk under the data dir: clear 507 ``storage_full`` answers, no reset connection, no
call started without its row, nothing lost once space is back, and the audit chain intact."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ongrid_skills.store import open_store
from ongrid_skills.types import Role
from tests.support.mcp import start_serve, stop
from tests.support.skills import MakeSkill

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a small tmpfs for the data dir needs root"
)
CALLS = 12


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(fs: Path) -> Path:
    """Write a file until the filesystem refuses one more byte."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_a_full_data_dir_answers_storage_full_and_loses_nothing_once_space_is_back(
    small_fs: Path, skills_root: Path, make_skill: MakeSkill
) -> None:
    make_skill("echo_ok")
    data = small_fs / "data"
    store = open_store(str(data))
    token = store.tokens.create("olga", Role.OPERATOR)[0]
    store.close()
    server = start_serve(data, {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root)})
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{server.url}/v1/skills/echo_ok/execute"
    try:
        with httpx.Client(timeout=30, headers=headers) as http:
            assert http.post(url, json={}).status_code == 200
            filler = fill(small_fs)
            answers = [http.post(url, json={}) for _ in range(CALLS)]
            codes = [a.status_code for a in answers]
            assert set(codes) <= {200, 507}, [a.text for a in answers]
            assert 507 in codes
            for answer in answers:
                if answer.status_code == 507:
                    assert answer.json()["error"]["code"] == "storage_full"
            assert http.get(f"{server.url}/v1/health").status_code == 200

            filler.unlink()
            after = http.post(url, json={})
            assert after.status_code == 200
            assert after.json()["status"] == "succeeded"
            ran = 1 + codes.count(200) + 1
            deadline = time.monotonic() + 30
            delay = 0.05
            while True:
                items = http.get(
                    f"{server.url}/v1/executions", params={"skill": "echo_ok", "limit": 100}
                ).json()["items"]
                if [i["status"] for i in items] == ["succeeded"] * ran:
                    break
                assert time.monotonic() < deadline, items
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            verify = http.get(f"{server.url}/v1/audit/verify").json()
            assert verify["ok"] is True, verify
    finally:
        stop(server)
