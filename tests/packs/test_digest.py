"""The pack digest: every byte, path and executable bit; stable across folder, tar and zip; the
definition in docs/packs.md reimplemented from the page and compared."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from ongrid_skills.packs.build import build_archive
from ongrid_skills.packs.digest import digest_folder, digest_text, hash_folder
from ongrid_skills.packs.files import Limits
from ongrid_skills.packs.source import staged
from tests.support.packs import write_pack

DOCS = Path(__file__).resolve().parents[2] / "docs" / "packs.md"


def fixed_folder(root: Path) -> Path:
    """A folder whose digest is written down below: nested, executable, non-ASCII names."""
    (root / "skills" / "ä-b").mkdir(parents=True)
    (root / "pack.json").write_bytes(b'{"id": "v", "version": "1.0.0", "description": "d"}\n')
    (root / "skills" / "ä-b" / "run").write_bytes(b"#!/bin/sh\necho '{}'\n")
    (root / "skills" / "ä-b" / "run").chmod(0o755)
    (root / "skills" / "Z.md").write_bytes(b"")
    return root


def test_a_fixed_folder_has_the_digest_written_down(tmp_path: Path) -> None:
    # Computed by hand with sha256sum and printf, not by the code under test.
    root = fixed_folder(tmp_path / "p")
    assert digest_text(hash_folder(root, Limits())).splitlines() == [
        "ongrid-pack-digest v1",
        "644 ae98de3287a53243d64cf9f60ff66f2e0fe5d66bcc732db5a7d9cdf657f1dbaa pack.json",
        "644 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 skills/Z.md",
        "755 78ab54e7e0931ced13794f05b9f355a0ada843278164453b6fbe5bb17078c7fa skills/ä-b/run",
    ]
    expected = "sha256:51b4511acfe8ec73faf3ec2cfde33c8057520cb814d933c8f20ca7ffad945313"
    assert digest_folder(root) == expected


def test_the_digest_is_the_same_for_a_folder_its_tar_gz_and_its_zip(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "src", skills=["alpha", "beta"], native=["triage"])
    expected = digest_folder(root)
    built = build_archive(root, tmp_path / "built.tar.gz")
    assert built.digest == expected
    flat_tar = tmp_path / "flat.tar.gz"  # no top folder, other mtimes and owners, other order
    with tarfile.open(flat_tar, "w:gz") as tar:
        for path in sorted(root.rglob("*"), reverse=True):
            info = tar.gettarinfo(str(path), str(path.relative_to(root)))
            info.mtime, info.uid, info.uname = 12345, 1000, "someone"
            if path.is_file():
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    zipped = tmp_path / "p.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_STORED) as zf:
        for path in sorted(root.rglob("*")):
            zf.write(path, f"wrapped/{path.relative_to(root)}")
    for archive in (tmp_path / "built.tar.gz", flat_tar, zipped):
        with staged(archive) as pack:
            assert pack.digest == expected, archive.name


def test_every_byte_every_path_and_the_executable_bit_change_the_digest(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p")
    run = root / "skills" / "alpha" / "run"
    seen = {digest_folder(root)}
    run.write_bytes(run.read_bytes() + b"\n")  # one more byte of an executable
    seen.add(digest_folder(root))
    run.chmod(0o644)
    seen.add(digest_folder(root))
    os.rename(run, run.with_name("run2"))
    seen.add(digest_folder(root))
    (root / "NOTES").write_bytes(b"")  # an empty file counts too
    seen.add(digest_folder(root))
    assert len(seen) == 5


def test_mtimes_group_bits_empty_folders_git_and_pack_sig_do_not(tmp_path: Path) -> None:
    root = write_pack(tmp_path / "p")
    before = digest_folder(root)
    os.utime(root / "pack.json", (1, 1))
    (root / "pack.json").chmod(0o664)  # only the owner's x bit counts
    (root / "empty").mkdir()
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "pack.sig").write_text("{}")
    assert digest_folder(root) == before
    (root / "skills" / "pack.sig").write_text("{}")  # only the root's pack.sig is left out
    assert digest_folder(root) != before


def snippet(marker: str) -> str:
    """The code block after ``<!-- marker -->`` in docs/packs.md."""
    match = re.search(rf"<!-- {re.escape(marker)} -->\n```\w+\n(.*?)```", DOCS.read_text(), re.S)
    assert match, f"no {marker} snippet in docs/packs.md"
    return match.group(1)


def documented_tree(root: Path) -> Path:
    write_pack(root, skills=["alpha"], native=["triage"], personas=["oncall"])
    fixed_folder(root / "extra")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "pack.sig").write_text("{}")
    (root / "tool with space.sh").write_text("#!/bin/sh\n")
    (root / "tool with space.sh").chmod(0o750)
    return root


def test_the_python_reimplementation_in_the_docs_gives_the_same_digest(tmp_path: Path) -> None:
    root = documented_tree(tmp_path / "p")
    namespace: dict[str, object] = {}
    exec(compile(snippet("digest.py"), str(DOCS), "exec"), namespace)
    assert namespace["pack_digest"](str(root)) == digest_folder(root)  # type: ignore[operator]


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("bash", "find", "sha256sum", "stat")),
    reason="needs GNU coreutils",
)
def test_the_shell_reimplementation_in_the_docs_gives_the_same_digest(tmp_path: Path) -> None:
    root = documented_tree(tmp_path / "p")
    result = subprocess.run(
        ["bash", "-c", snippet("digest.sh")], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == digest_folder(root)
