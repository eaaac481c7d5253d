"""read_skill lists a skill's folder and files; read_skill_file serves one of them, confined.

Real skill folders in tmp_path, run through ``ongrid_skills.execute`` like any call: symlinks out
of the folder, ``..``, absolute and hidden paths, folders, FIFOs, binary and oversized files are
refused with their own error codes; ``{baseDir}`` in a body becomes the folder.
"""

from __future__ import annotations

import os
from asyncio import run
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import InvalidArgs
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.skills.bundle import MAX_FILE_BYTES, MAX_LISTED_FILES
from ongrid_skills.skills.registry import Registry
from tests.support.mcp import write_skill
from tests.support.skills import load, write_exec, write_skill_md

BODY = "Run `python {baseDir}/scripts/fill.py` and see ${CLAUDE_SKILL_DIR}/forms.md.\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "native"
    folder = root / "pdf"
    write_skill_md(folder.parent, "pdf", {"name": "pdf-forms", "description": "PDF forms."}, BODY)
    (folder / "forms.md").write_text("# Forms\nField names.\n")
    (folder / "reference").mkdir()
    (folder / "reference" / "api.md").write_text("# API\n")
    write_exec(folder, "scripts/fill.py", "#!/usr/bin/env python3\nprint('fill')\n")
    (folder / ".env").write_text("SECRET=1\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[core]\n")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (folder / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (folder / "big.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    (folder / "to-inside.md").symlink_to(folder / "forms.md")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    (folder / "to-outside.md").symlink_to(secret)
    (folder / "to-sibling.md").symlink_to(root / "other" / "SKILL.md")
    (folder / "linked-dir").symlink_to(tmp_path, target_is_directory=True)
    os.mkfifo(folder / "pipe")
    write_skill_md(folder, "nested", {"name": "nested_skill", "description": "Its own skill."})
    (folder / "nested" / "notes.md").write_text("nested notes\n")
    write_skill_md(root, "other", {"name": "other", "description": "A sibling skill."})
    return root


@pytest.fixture
def registry(tree: Path) -> Registry:
    external = tree.parent / "external"
    write_skill(external, "plain_tool")
    loaded, lines = load([tree], [external], bundled=True)
    assert not loaded.report.errors, lines
    return loaded


def call(registry: Registry, name: str, args: dict[str, Any]) -> Execution:
    return run(ongrid_skills.execute(registry, name, args))


def read(registry: Registry, path: str, name: str = "pdf_forms") -> Execution:
    return call(registry, "read_skill_file", {"name": name, "path": path})


def test_read_skill_gives_the_folder_the_files_and_the_body_with_base_dir(
    registry: Registry, tree: Path
) -> None:
    done = call(registry, "read_skill", {"name": "pdf-forms"})
    assert done.status is Status.SUCCEEDED, done.error
    folder = str((tree / "pdf").resolve())
    assert done.result["folder"] == folder
    assert done.result["body"] == (
        f"Run `python {folder}/scripts/fill.py` and see {folder}/forms.md.\n"
    )
    listed = {f["path"]: f["size"] for f in done.result["files"]}
    assert listed == {
        "big.txt": MAX_FILE_BYTES + 1,
        "forms.md": 21,
        "latin1.txt": 5,
        "logo.png": 16,
        "reference/api.md": 6,
        "scripts/fill.py": 37,
        "to-inside.md": 21,
    }  # no hidden entry, no link out, no FIFO, no folder link, nothing of the nested skill
    assert done.result["files_truncated"] is False
    assert done.result["aliases"] == ["pdf-forms", "native:pdf-forms", "native:pdf_forms"]


def test_read_skill_file_returns_one_file_as_text(registry: Registry) -> None:
    done = read(registry, "reference/api.md")
    assert done.status is Status.SUCCEEDED, done.error
    assert done.result == {
        "name": "pdf_forms",
        "path": "reference/api.md",
        "size": 6,
        "text": "# API\n",
    }
    assert read(registry, "./reference/../forms.md").result["path"] == "forms.md"
    assert read(registry, "to-inside.md").result["text"] == "# Forms\nField names.\n"
    assert read(registry, "SKILL.md").result["text"].startswith("---\nname: pdf-forms")
    by_alias = call(registry, "read_skill_file", {"name": "native:pdf-forms", "path": "forms.md"})
    assert by_alias.status is Status.SUCCEEDED


@pytest.mark.parametrize(
    ("path", "code", "says"),
    [
        ("../other/SKILL.md", "outside_skill", "leaves the skill's folder"),
        ("reference/../../other/SKILL.md", "outside_skill", "leaves the skill's folder"),
        ("/etc/passwd", "outside_skill", "is absolute"),
        ("to-outside.md", "outside_skill", "resolves outside the skill's folder"),
        ("to-sibling.md", "outside_skill", "resolves outside the skill's folder"),
        ("linked-dir/secret.txt", "outside_skill", "resolves outside the skill's folder"),
        (".env", "outside_skill", "hidden"),
        (".git/config", "outside_skill", "hidden"),
        ("missing.md", "file_not_found", "no file 'missing.md'"),
        ("reference", "not_a_file", "is a folder"),
        ("pipe", "not_a_file", "not a regular file"),
        ("logo.png", "binary_file", "binary"),
        ("latin1.txt", "binary_file", "not UTF-8 text"),
        ("big.txt", "file_too_large", f"over the {MAX_FILE_BYTES}-byte cap"),
    ],
)
def test_read_skill_file_refuses_with_a_typed_error(
    registry: Registry, path: str, code: str, says: str
) -> None:
    done = read(registry, path)
    assert done.status is Status.FAILED
    assert done.error is not None
    assert done.error.code == code, done.error
    assert says in done.error.message
    assert "top secret" not in (done.result_text or "")


def test_read_skill_file_on_an_unknown_skill_or_one_without_files(registry: Registry) -> None:
    unknown = read(registry, "forms.md", name="nope")
    assert unknown.error is not None and unknown.error.code == "not_found"
    plain = read(registry, "run", name="plain_tool")
    assert plain.error is not None and plain.error.code == "file_not_found"
    assert "not a SKILL.md skill" in plain.error.message


def test_read_skill_file_bounds_its_args(registry: Registry) -> None:
    with pytest.raises(InvalidArgs):
        call(registry, "read_skill_file", {"name": "pdf_forms"})
    with pytest.raises(InvalidArgs):
        call(registry, "read_skill_file", {"name": "pdf_forms", "path": ""})
    with pytest.raises(InvalidArgs):
        call(registry, "read_skill_file", {"name": "pdf_forms", "path": "x" * 1025})


def test_read_skill_file_is_a_safe_catalogue_tool(registry: Registry) -> None:
    skill = registry.get("read_skill_file")
    assert skill.skill_class.value == "safe"
    assert skill.category == "catalogue"
    assert skill.activation == "always"


def test_a_long_listing_is_cut_and_says_so(tmp_path: Path) -> None:
    root = tmp_path / "native"
    write_skill_md(root, "many", {"name": "many", "description": "Many files."})
    for index in range(MAX_LISTED_FILES + 5):
        (root / "many" / f"f{index:04d}.md").write_text("x\n")
    registry, _ = load([root], bundled=True)
    done = call(registry, "read_skill", {"name": "many"})
    assert len(done.result["files"]) == MAX_LISTED_FILES
    assert done.result["files_truncated"] is True
    last = f"f{MAX_LISTED_FILES + 4:04d}.md"
    assert read(registry, last, name="many").status is Status.SUCCEEDED  # still readable
