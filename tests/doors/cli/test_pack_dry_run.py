"""``ongrid-skills pack install --dry-run`` as the console script: what a pack brings (its
capability summary, read and JSON), every check of an install, and nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ongrid_skills.skills.packroots import active_versions
from tests.support.packs import tree, write_pack
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS, write_persona

EXAMPLES = EXAMPLE_SKILLS.parent / "packs"
OPS = json.loads((EXAMPLES / "index.json").read_text())["packs"][0]["versions"][0]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "data").mkdir()
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "ONGRID_TRUSTED_PACK_KEYS": str(EXAMPLES / "TEST-KEY-DO-NOT-USE.pub"),
        "ONGRID_PACK_INDEXES": str(EXAMPLES / "index.json"),
    }


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "-q", "pack", "install", "--dry-run", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_dry_run_prints_the_summary_and_leaves_the_data_dir_as_it_was(
    env: dict[str, str], tmp_path: Path
) -> None:
    data = Path(env["ONGRID_DATA_DIR"])

    shown = run(env, "ops-basics")  # opens (makes) the store: the tree is compared from here
    before = tree(data)
    as_json = run(env, "ops-basics", "--json")

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"pack ops-basics@{OPS['version']}: Read-only first look")
    assert f"digest {OPS['digest']}" in lines
    assert f"signer {OPS['signer']} (trusted)" in lines
    assert any(
        line.split() == ["listening_sockets", "safe", "manager", "subprocess"] for line in lines
    )
    assert any(line.split() == ["oncall", "read-only"] for line in lines)
    assert lines[-1] == "dry run: nothing changed (not installed)"
    assert as_json.returncode == 0, as_json.stderr
    body = json.loads(as_json.stdout)
    assert body["dry_run"] is True
    assert body["summary"]["digest"] == OPS["digest"]
    assert sorted(s["name"] for s in body["summary"]["skills"]) == [
        "host_triage",
        "listening_sockets",
        "mount_report",
    ]
    assert tree(data) == before
    assert active_versions(str(data)) == {}


def test_a_dry_run_of_a_bad_pack_lists_its_problems_and_exits_2(
    env: dict[str, str], tmp_path: Path
) -> None:
    folder = write_pack(tmp_path / "bad", "bad", "1.0.0", skills=())
    write_persona(folder / "agents", "mad", "root-everything")

    done = run(env, str(folder))

    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: pack bad@1.0.0 is not valid" in done.stderr
    assert "agents/mad.md" in done.stderr
    assert active_versions(env["ONGRID_DATA_DIR"]) == {}
