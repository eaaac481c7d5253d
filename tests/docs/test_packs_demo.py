"""docs/packs.md's demo marketplace, run as written from a fresh clone: ``make run``'s server
(the environment the Makefile gives it, checked below against the Makefile itself) on the
clone's ``./.ongrid``, and every line of the section's shell block in order (tests/docs/shell.py),
each exiting 0 or the status its ``# exits N`` comment announces. The example pack installs over
REST without colliding with the example skills, signed by the key ``make run`` trusts, and its
skills then run on the server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.docs.doc_commands import REPO, blocks, logical_lines
from tests.docs.shell import Shell, make_clone
from tests.support.server import ServeProcess, start_serve, stop

DOC = REPO / "docs" / "packs.md"
SECTION = "Try it: the demo marketplace of `make run`"
EXITS = re.compile(r"#\s*exits (\d+)")


def make_run_environment(root: Path) -> dict[str, str]:
    """What ``make run`` in ``root`` sets for the server, with no ONGRID_* variable set."""
    examples = root / "examples"
    return {
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(examples / "skills"),
        "ONGRID_PERSONAS_DIRS": str(examples / "personas"),
        "ONGRID_TRUSTED_PACK_KEYS": str(examples / "packs" / "TEST-KEY-DO-NOT-USE.pub"),
        "ONGRID_PACK_INDEXES": str(examples / "packs" / "index.json"),
    }


def demo_lines() -> list[str]:
    [block] = [b for b in blocks(DOC) if b.heading == SECTION and b.lang == "sh"]
    return [line for _, line in logical_lines(block.text) if line.strip()]


@pytest.fixture
def clone_and_server(tmp_path: Path) -> Iterator[tuple[Path, ServeProcess]]:
    clone = make_clone(tmp_path)
    env = {**make_run_environment(clone), "ONGRID_BUNDLED_SKILLS": "1"}  # as make run has it
    server = start_serve(clone / ".ongrid", env, startup_lines=2)
    try:
        yield clone, server
    finally:
        stop(server)


def test_the_demo_marketplace_works_as_written_from_a_fresh_clone(
    clone_and_server: tuple[Path, ServeProcess], tmp_path: Path
) -> None:
    clone, server = clone_and_server
    admin = (clone / ".ongrid" / "first-admin-token").read_text().strip()
    port = server.url.rsplit(":", 1)[1]
    shell = Shell(clone, tmp_path)
    outputs = []
    for line in demo_lines():
        typed = line.replace("127.0.0.1:8731", f"127.0.0.1:{port}").replace("ogs_…", admin)
        typed = typed.replace("port=8731", f"port={port}")
        expected = EXITS.search(line)
        ran = shell.run(typed)
        assert ran.code == (int(expected.group(1)) if expected else 0), str(ran)
        outputs.append(ran)
    installed = json.loads(next(r.out for r in outputs if "/v1/packs" in r.line))
    assert installed["pack"]["id"] == "ops-basics", installed
    skills = httpx.get(
        f"{server.url}/v1/skills", headers={"Authorization": f"Bearer {admin}"}, timeout=10
    ).json()["items"]
    names = {s["name"] for s in skills}
    assert {"listening_sockets", "mount_report", "host_triage", "host_info", "port_check"} <= names
    listening = outputs[-1].out
    assert f'"port": {port}' in listening, listening


def test_make_run_trusts_the_example_key_saying_so_unless_the_variable_is_set(
    tmp_path: Path,
) -> None:
    # The real target, with BIN aimed at a stand-in that prints the environment it was given.
    fake = tmp_path / "bin" / "ongrid-skills"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nenv | grep "^ONGRID_" | sort\n')
    fake.chmod(0o755)

    def make_run(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            # -o: never rebuild the virtualenv here, whatever its stamp's age.
            ["make", "-s", "-o", ".venv/.installed-run", "run", f"BIN={fake.parent}"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"PATH": os.environ["PATH"], **env},
            timeout=60,
            check=True,
        )

    demo = make_run()
    shown = dict(line.split("=", 1) for line in demo.stdout.splitlines())
    assert shown == make_run_environment(REPO)
    assert "trusting the example pack's TEST key" in demo.stderr
    assert "To trust no key: ONGRID_TRUSTED_PACK_KEYS= make run" in demo.stderr
    none = make_run(ONGRID_TRUSTED_PACK_KEYS="")
    assert "ONGRID_TRUSTED_PACK_KEYS=\n" in none.stdout
    assert none.stderr == ""
    mine = make_run(ONGRID_TRUSTED_PACK_KEYS="/etc/ongrid/pack-keys")
    assert "ONGRID_TRUSTED_PACK_KEYS=/etc/ongrid/pack-keys\n" in mine.stdout
