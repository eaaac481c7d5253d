"""pack build: validated first, then a reproducible archive — the same files, the same bytes."""

from __future__ import annotations

import gzip
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from ongrid_skills.errors import PackError
from ongrid_skills.packs.build import build_archive
from tests.support.packs import write_pack
from tests.support.skills import write_skill


def test_building_twice_gives_identical_bytes(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=["alpha", "beta"], native=["triage"])
    first = build_archive(root, tmp_path / "one.tar.gz").path.read_bytes()
    # Another copy of the same files, made later, with other mtimes and other group bits.
    copy = tmp_path / "elsewhere" / "p"
    shutil.copytree(root, copy)
    for path in copy.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
        path.chmod(path.stat().st_mode | 0o070)
    second = build_archive(copy, tmp_path / "two.tar.gz").path.read_bytes()
    assert first == second


def test_the_archive_has_sorted_entries_fixed_times_owners_and_modes(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", "ops", "1.2.0", skills=["beta", "alpha"])
    (root / "skills" / "alpha" / "run").chmod(0o4775)  # setuid and group bits are dropped
    built = build_archive(root, tmp_path)
    assert built.path == tmp_path / "ops-1.2.0.tar.gz"
    raw = built.path.read_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # gzip header mtime 0
    assert gzip.decompress(raw)  # and one gzip member that decompresses
    with tarfile.open(built.path) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == [
        "ops-1.2.0",
        "ops-1.2.0/pack.json",
        "ops-1.2.0/skills",
        "ops-1.2.0/skills/alpha",
        "ops-1.2.0/skills/alpha/run",
        "ops-1.2.0/skills/alpha/skill.json",
        "ops-1.2.0/skills/beta",
        "ops-1.2.0/skills/beta/run",
        "ops-1.2.0/skills/beta/skill.json",
    ]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    modes = {m.name.split("/", 1)[-1]: m.mode for m in members}
    assert modes["skills/alpha/run"] == 0o755
    assert modes["pack.json"] == modes["skills/alpha/skill.json"] == 0o644
    assert modes["skills"] == 0o755


def test_an_invalid_pack_is_not_built_and_every_problem_is_listed(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p", skills=["alpha"])
    write_skill(root / "skills", "beta", entry="missing")
    write_skill(root / "other", "alpha")
    with pytest.raises(PackError) as caught:
        build_archive(root, tmp_path / "out.tar.gz")
    paths = [p.path for p in caught.value.problems]
    assert paths == ["skills/alpha/skill.json", "skills/beta/skill.json"]
    assert not (tmp_path / "out.tar.gz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["p"]  # no temporary file left either


def test_a_folder_with_a_symlink_is_not_built(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p")
    (root / "skills" / "alpha" / "lib").symlink_to("/etc")
    with pytest.raises(PackError, match="skills/alpha/lib: a symbolic link"):
        build_archive(root, tmp_path / "out.tar.gz")


def test_git_folders_stay_out_of_the_archive(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    with tarfile.open(build_archive(root, tmp_path).path) as tar:
        assert not [n for n in tar.getnames() if ".git" in n]


def test_a_path_that_is_not_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(PackError, match="not a folder"):
        build_archive(tmp_path / "file")
