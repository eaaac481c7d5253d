"""Staging a pack from a folder or an archive: the same rules for both, and nothing left behind
when a pack is refused."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ongrid_skills.errors import BadSignature, PackError, UnsafePack
from ongrid_skills.packs.files import Limits, clean_path
from ongrid_skills.packs.source import stage, staged
from tests.support.packs import pack_entries, tar_gz, tree, write_pack


@pytest.fixture
def into(tmp_path: Path) -> Path:
    (tmp_path / "into").mkdir()
    return tmp_path / "into"


def test_a_folder_is_staged_as_a_copy_with_normal_modes(tmp_path: Path, into: Path) -> None:
    root = write_pack(tmp_path / "p", native=["triage"])
    (root / "skills" / "alpha" / "run").chmod(0o6775)
    (root / "pack.json").chmod(0o664)
    pack = stage(root, into)
    assert pack.staging.parent == into
    assert tree(pack.root) == tree(root)
    assert stat.S_IMODE((pack.root / "skills/alpha/run").stat().st_mode) == 0o755
    assert stat.S_IMODE((pack.root / "pack.json").stat().st_mode) == 0o644
    assert pack.manifest.label == "demo@1.0.0"
    assert pack.signature is None
    pack.discard()
    assert list(into.iterdir()) == []
    pack.discard()  # twice is harmless (it may have been renamed away)


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda r: (r / "lib").symlink_to("skills"), "lib: a symbolic link"),
        (lambda r: (r / "out").symlink_to("/etc/passwd"), "out: a symbolic link"),
        (lambda r: os.mkfifo(r / "pipe"), "pipe: a FIFO"),
        (lambda r: (r / "Pack.JSON").write_text("{}"), "only by letter case"),
        (lambda r: (r / "bad\nname").write_text("x"), "control character"),
    ],
)
def test_a_folder_breaking_a_rule_is_refused_before_anything_is_staged(
    tmp_path: Path, into: Path, make: object, rule: str
) -> None:
    root = write_pack(tmp_path / "p")
    make(root)  # type: ignore[operator]
    with pytest.raises(UnsafePack) as caught:
        stage(root, into)
    assert rule in str(caught.value)
    assert list(into.iterdir()) == []


def test_a_folder_over_the_limits_is_refused(tmp_path: Path, into: Path) -> None:
    root = write_pack(tmp_path / "p")
    (root / "big").write_bytes(b"x" * 5000)
    with pytest.raises(UnsafePack, match="more than 4096 bytes"):
        stage(root, into, Limits(max_bytes=4096))
    with pytest.raises(UnsafePack, match="more than 3 entries"):
        stage(root, into, Limits(max_files=3))
    assert list(into.iterdir()) == []


def test_a_staged_archive_that_is_no_pack_leaves_nothing(tmp_path: Path, into: Path) -> None:
    archive = tar_gz(tmp_path / "a.tar.gz", pack_entries("a/") + pack_entries("b/"))
    with pytest.raises(PackError, match="is not a pack"):
        stage(archive, into)
    assert list(into.iterdir()) == []


def test_an_unreadable_signature_file_refuses_and_leaves_nothing(
    tmp_path: Path, into: Path
) -> None:
    root = write_pack(tmp_path / "p")
    (root / "pack.sig").write_text("not json")
    with pytest.raises(BadSignature, match="not a JSON signature file"):
        stage(root, into)
    with pytest.raises(PackError, match="no such signature file"):
        stage(root, into, signature=tmp_path / "missing.sig")
    assert list(into.iterdir()) == []


def test_a_missing_source_is_a_pack_error(tmp_path: Path, into: Path) -> None:
    with pytest.raises(PackError, match="no such folder or archive"):
        stage(tmp_path / "nothing", into)


def test_staged_removes_its_temporary_folder(tmp_path: Path) -> None:
    with staged(write_pack(tmp_path / "p"), into=tmp_path) as pack:
        assert pack.root.exists()
    assert not pack.staging.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["p"]


@pytest.mark.parametrize(
    ("name", "clean"),
    [("./a//b/", "a/b"), ("a/./b", "a/b"), ("./", ""), ("é/ü", "é/ü")],
)
def test_clean_paths_drop_dots_and_empty_components(name: str, clean: str) -> None:
    assert clean_path(name) == clean


@pytest.mark.parametrize("name", ["a/" + "x" * 256, "x/" * 2049, "a\x7fb", "a\x00b"])
def test_clean_paths_refuse_long_and_control_names(name: str) -> None:
    with pytest.raises(UnsafePack):
        clean_path(name)
