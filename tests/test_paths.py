"""Path and environment safety helpers: dir lists, containment, entry checks, child env."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ongrid_skills.paths import (
    ExposedKeyFile,
    check_entry,
    child_env,
    content_digest,
    fingerprint,
    is_within,
    read_regular,
    split_dir_list,
)

SCRIPT = "#!/bin/sh\necho '{}'\n"


@pytest.mark.parametrize(
    ("value", "dirs"),
    [
        ("", []),
        ("   ", []),
        ("/a", ["/a"]),
        ("/a:/b", ["/a", "/b"]),
        ("/a,/b", ["/a", "/b"]),
        (" /a : /b , /c ", ["/a", "/b", "/c"]),
        (":,/a::,,/b,:", ["/a", "/b"]),
        ("/with space/dir:/b", ["/with space/dir", "/b"]),
        ("rel/dir,/abs", ["rel/dir", "/abs"]),
    ],
)
def test_a_dir_list_splits_on_colon_and_comma_dropping_blanks_and_trimming_spaces(
    value: str, dirs: list[str]
) -> None:
    assert split_dir_list(value) == dirs


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/etc/ongrid/skills", "/etc/ongrid/skills", True),
        ("/etc/ongrid/skills/a/run", "/etc/ongrid/skills", True),
        ("/etc/ongrid/skills-evil/run", "/etc/ongrid/skills", False),
        ("/etc/ongrid/skillsrun", "/etc/ongrid/skills", False),
        ("/etc/ongrid", "/etc/ongrid/skills", False),
        ("/tmp/escape.sh", "/etc/ongrid/skills", False),
        ("/anything", "/", True),
        ("/a/b", "/a/", True),
    ],
)
def test_containment_is_by_path_component_not_by_string_prefix(
    path: str, root: str, inside: bool
) -> None:
    assert is_within(path, root) is inside


def make_exec(path: Path, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SCRIPT)
    path.chmod(mode)
    return path


def test_check_entry_accepts_an_executable_under_the_root_and_canonicalises_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    real = make_exec(root / "a" / "run")
    (root / "a" / "alias").symlink_to(real)
    check = check_entry(str(root / "a" / "alias"), os.path.realpath(root))
    assert check.problem is None
    assert check.path == os.path.realpath(real)


def test_check_entry_refuses_a_symlink_escaping_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = make_exec(tmp_path / "escape.sh")
    (root / "a").mkdir(parents=True)
    (root / "a" / "run").symlink_to(outside)
    check = check_entry(str(root / "a" / "run"), os.path.realpath(root), "/shown/root")
    real = os.path.realpath(outside)
    assert check.problem == f"entry {real} escapes allowlist root /shown/root"


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        ("missing", "does not exist"),
        ("directory", "is not a regular file"),
        ("not-executable", "is not executable"),
    ],
)
def test_check_entry_refuses_a_missing_directory_or_non_executable_entry(
    tmp_path: Path, setup: str, problem: str
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    entry = root / "run"
    if setup == "directory":
        entry.mkdir()
    elif setup == "not-executable":
        make_exec(entry, 0o644)
    check = check_entry(str(entry), os.path.realpath(root))
    assert check.problem == f"entry {entry} {problem}"


def test_the_child_environment_holds_only_allowed_names_that_are_set() -> None:
    environ = {"PATH": "/bin", "HOME": "/root", "SECRET": "x"}
    assert child_env(["HOME", "UNSET_NAME"], environ) == {"HOME": "/root"}
    assert child_env([], environ) == {}


def test_the_content_digest_is_refused_once_the_file_was_rewritten_in_place_and_retouched(
    tmp_path: Path,
) -> None:
    entry = tmp_path / "run.sh"
    entry.write_bytes(b"#!/bin/sh\necho safe\n")
    before = entry.stat()
    loaded = fingerprint(before)
    assert content_digest(str(entry), loaded) == hashlib.sha256(entry.read_bytes()).hexdigest()

    with entry.open("r+b") as f:
        f.write(b"#!/bin/sh\necho evil\n")
    os.utime(entry, ns=(before.st_atime_ns, before.st_mtime_ns))

    assert fingerprint(entry.stat()) != loaded  # the ctime moved; utime cannot put it back
    assert content_digest(str(entry), loaded) is None
    rewritten = fingerprint(entry.stat())
    evil = hashlib.sha256(b"#!/bin/sh\necho evil\n").hexdigest()
    assert content_digest(str(entry), rewritten) == evil


@pytest.mark.parametrize("mode", [0o644, 0o660, 0o602])
def test_a_key_file_group_or_others_may_use_is_refused_with_one_message(
    tmp_path: Path, mode: int
) -> None:
    key = tmp_path / "some.key"
    key.write_text("secret")
    key.chmod(mode)
    with pytest.raises(ExposedKeyFile) as caught:
        read_regular(str(key), 100, key_file="some key file")
    assert str(caught.value) == (
        f"some key file {key} may be read by group or others (mode {mode:04o}); "
        f"refusing to use it: chmod 600 {key}"
    )
    key.chmod(0o600)
    assert read_regular(str(key), 100, key_file="some key file") == b"secret"
    key.chmod(0o644)
    assert read_regular(str(key), 100) == b"secret"  # not a key file: no such rule
