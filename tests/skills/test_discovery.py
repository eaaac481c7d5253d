"""Walking the allow-listed roots (SPEC §3): which dirs are taken, in which order, what is logged.

Real trees are built under tmp_path (folders, skill.json files, executables, symlinks, FIFOs and
unreadable folders); the loader lines are captured and compared byte for byte.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import Settings, Skill
from ongrid_skills.skills.discovery import LoadReport, load_external
from ongrid_skills.skills.registry import build_registry
from tests.support.unprivileged import run_unprivileged

SCRIPT = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"

# --- helpers -------------------------------------------------------------------------------


def write_skill(folder: Path, name: str, **fields: Any) -> Path:
    """Write folder/skill.json and an executable folder/run; return the manifest path."""
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / "run"
    entry.write_text(SCRIPT)
    entry.chmod(0o755)
    body = {"name": name, "description": f"{name} from {folder.name}", "entry": "run", **fields}
    path = folder / "skill.json"
    path.write_text(json.dumps(body))
    return path


def load(*roots: Path | str) -> tuple[ongrid_skills.Registry, list[str]]:
    lines: list[str] = []
    registry = ongrid_skills.load_registry(
        external_dirs=[str(r) for r in roots],
        persona_dirs=[],
        settings=Settings.load(environ={"ONGRID_BUNDLED_SKILLS": "0"}),
        log=lines.append,
    )
    return registry, lines


def registered(name: str, path: Path | str) -> str:
    return f'skill loader: registered subprocess skill "{name}" from {path}'


def duplicate(name: str, path: Path | str) -> str:
    return f'skill loader: skill "{name}" already registered, skipping {path}'


def paths_in(lines: list[str]) -> list[str]:
    """Every token of the lines that looks like a path."""
    return [tok for line in lines for tok in line.split() if "/" in tok and "[" not in tok]


# --- the roots -----------------------------------------------------------------------------


def test_a_relative_root_is_skipped_with_the_non_absolute_log_line(tmp_path: Path) -> None:
    registry, lines = load("relative/dir")
    assert len(registry) == 0
    assert lines == ['skill loader: skip non-absolute dir "relative/dir"']


def test_a_dot_relative_root_is_skipped_even_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill(tmp_path / "skills" / "a", "a")
    monkeypatch.chdir(tmp_path)
    registry, lines = load("./skills", "skills")
    assert len(registry) == 0
    assert lines == [
        'skill loader: skip non-absolute dir "./skills"',
        'skill loader: skip non-absolute dir "skills"',
    ]


def test_a_missing_root_is_skipped_with_the_not_present_log_line(tmp_path: Path) -> None:
    missing = tmp_path / "etc" / "ongrid" / "skills"
    registry, lines = load(missing)
    assert len(registry) == 0
    assert lines == [f"skill loader: dir {missing} not present, skipping"]


def test_a_root_that_is_a_file_is_skipped(tmp_path: Path) -> None:
    afile = tmp_path / "skills"
    afile.write_text("not a dir")
    registry, lines = load(afile)
    assert len(registry) == 0
    assert lines == [f"skill loader: dir {afile} is not a directory, skipping"]


def test_an_empty_root_is_a_no_op(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    registry, lines = load(root)
    assert len(registry) == 0
    assert lines == []


def test_no_roots_at_all_load_nothing_and_log_nothing() -> None:
    registry, lines = load()
    assert len(registry) == 0
    assert lines == []


def test_skipped_roots_do_not_stop_the_next_roots(tmp_path: Path) -> None:
    good = tmp_path / "good"
    path = write_skill(good / "a", "a")
    afile = tmp_path / "file"
    afile.write_text("")
    registry, lines = load("rel", tmp_path / "missing", afile, good)
    assert list(registry.skills) == ["a"]
    assert lines == [
        'skill loader: skip non-absolute dir "rel"',
        f"skill loader: dir {tmp_path / 'missing'} not present, skipping",
        f"skill loader: dir {afile} is not a directory, skipping",
        registered("a", path),
    ]


def test_the_manifest_path_in_log_lines_is_absolute_and_normalised(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "a", "a")
    write_skill(root / "b", "a")
    write_skill(root / "c", "Bad")
    (root / "d").mkdir()
    (root / "d" / "skill.json").write_text("{")
    _, lines = load(f"{root}/./sub/../")
    assert lines[0] == registered("a", path)
    assert len(lines) == 4
    for token in paths_in(lines):
        assert os.path.isabs(token), token
        assert os.path.normpath(token) == token, token


def test_a_root_reached_through_a_symlink_loads_and_is_shown_as_written(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_skill(real / "a", "a")
    outside = tmp_path / "outside.sh"
    outside.write_text(SCRIPT)
    outside.chmod(0o755)
    write_skill(real / "b", "b", entry=str(outside))
    link = tmp_path / "link"
    link.symlink_to(real)
    registry, lines = load(link)
    assert list(registry.skills) == ["a"]
    assert lines == [
        registered("a", link / "a" / "skill.json"),
        f'skill loader: build "b": entry {os.path.realpath(outside)} escapes allowlist root '
        f"{link} (in {link / 'b' / 'skill.json'})",
    ]
    target = registry.get("a").target
    assert target is not None
    assert target.root == os.path.realpath(real)


# --- order and duplicates ------------------------------------------------------------------


def test_a_root_is_walked_in_sorted_order_depth_first_like_go_filepath_walk(
    tmp_path: Path,
) -> None:
    """Each folder is entered at its place among its siblings: b/ (and b/a/) before b.d/.

    A sort of whole paths would put b.d/skill.json before b/skill.json ('.' < '/'); os.walk
    would visit b/skill.json before b/a/skill.json. Go's Walk sorts the names of each folder.
    """
    root = tmp_path / "skills"
    root.mkdir()
    made = {}
    for rel, name in reversed(
        [
            ("B", "upper_b"),
            ("a", "plain_a"),
            ("b/a", "b_then_a"),
            ("b", "b_itself"),
            ("b/z/deeper", "b_z_deeper"),
            ("b.d", "b_dot_d"),
            ("", "at_root"),
        ]
    ):
        made[name] = write_skill(root / rel if rel else root, name)
    registry, lines = load(root)
    order = ["upper_b", "plain_a", "b_then_a", "b_itself", "b_z_deeper", "b_dot_d", "at_root"]
    assert lines == [registered(name, made[name]) for name in order]
    assert sorted(registry.skills) == sorted(order)


def test_the_walk_order_decides_which_duplicate_wins_inside_a_root(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    # Created in reverse order so that the directory's own order cannot help.
    late = write_skill(root / "b.d", "dup")
    mid = write_skill(root / "b", "dup")
    first = write_skill(root / "b" / "a", "dup")
    registry, lines = load(root)
    assert lines == [registered("dup", first), duplicate("dup", mid), duplicate("dup", late)]
    assert registry.get("dup").origin == str(first)
    assert registry.get("dup").description == "dup from a"


def test_uppercase_folder_names_sort_before_lowercase_ones(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    lower = write_skill(root / "alpha", "dup")
    upper = write_skill(root / "Zulu", "dup")
    _registry, lines = load(root)
    assert lines == [registered("dup", upper), duplicate("dup", lower)]


def test_the_same_tree_always_loads_in_the_same_order(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    for i in reversed(range(30)):
        write_skill(root / f"s{i % 7}" / f"n{i}", f"s{i}")
    first = load(root)[1]
    assert first == load(root)[1] == load(root)[1]
    assert len(first) == 30


def test_roots_are_taken_in_the_order_given_and_the_first_duplicate_wins(tmp_path: Path) -> None:
    one = write_skill(tmp_path / "one" / "x", "dup")
    two = write_skill(tmp_path / "two" / "x", "dup")
    registry, lines = load(tmp_path / "one", tmp_path / "two")
    assert lines == [registered("dup", one), duplicate("dup", two)]
    assert registry.get("dup").origin == str(one)
    registry, lines = load(tmp_path / "two", tmp_path / "one")
    assert lines == [registered("dup", two), duplicate("dup", one)]
    assert registry.get("dup").origin == str(two)


def test_a_root_given_twice_registers_its_skills_once(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "a", "a")
    registry, lines = load(root, root)
    assert len(registry) == 1
    assert lines == [registered("a", path), duplicate("a", path)]


def test_a_duplicate_of_a_builtin_skill_is_skipped_with_the_already_registered_line(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "probe", "probe_tcp")
    builtin = Skill(name="probe_tcp", description="built in", kind="native", source="builtin")
    lines: list[str] = []
    registry = build_registry([str(root)], [], sink=lines.append, extra=[builtin])
    assert lines == [duplicate("probe_tcp", path)]
    assert registry.get("probe_tcp") is builtin


def test_the_loader_returns_the_number_of_skills_registered(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root / "a", "a")
    write_skill(root / "b", "b")
    write_skill(root / "c", "a")  # duplicate
    write_skill(root / "d", "Bad")  # build error
    (root / "e").mkdir()
    (root / "e" / "skill.json").write_text("[]")  # parse error
    skills: dict[str, Skill] = {}
    report = LoadReport()
    lines: list[str] = []
    count = load_external([str(root)], skills, report, lines.append)
    assert count == 2
    assert sorted(skills) == ["a", "b"]
    assert report.registered == 2
    assert report.duplicates == 1
    assert len(report.errors) == 2
    assert len(lines) == 5
    assert [f"skill loader: {line}" for line in report.lines] == lines


def test_an_empty_root_registers_zero(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    report = LoadReport()
    assert load_external([str(root)], {}, report, lambda _line: None) == 0
    assert report.lines == []


def test_one_broken_manifest_does_not_prevent_the_others(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    a = write_skill(root / "a", "a")
    (root / "b").mkdir()
    broken = root / "b" / "skill.json"
    broken.write_bytes(b'{"name": "b",')
    c = write_skill(root / "c", "c", entry="missing.sh")
    d = write_skill(root / "d", "d")
    registry, lines = load(root)
    assert sorted(registry.skills) == ["a", "d"]
    missing = os.path.realpath(root / "c") + "/missing.sh"
    assert lines == [
        registered("a", a),
        f"skill loader: parse {broken}: Expecting property name enclosed in double quotes "
        "at line 1 column 14",
        f'skill loader: build "c": entry {missing} does not exist (in {c})',
        registered("d", d),
    ]


# --- what is a manifest --------------------------------------------------------------------


def test_only_files_named_exactly_skill_json_are_manifests(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "a", "a")
    for other in ["Skill.json", "skill.JSON", "skill.json.bak", "my-skill.json", "skill.yaml"]:
        (root / "a" / other).write_text("{")
    _, lines = load(root)
    assert lines == [registered("a", path)]


def test_a_manifest_at_the_root_itself_is_loaded(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root, "top")
    _registry, lines = load(root)
    assert lines == [registered("top", path)]


def test_skills_at_any_depth_are_found(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    deep = root.joinpath(*[f"d{i}" for i in range(40)])
    path = write_skill(deep, "deep")
    _registry, lines = load(root)
    assert lines == [registered("deep", path)]


def test_a_folder_named_skill_json_is_walked_not_read(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "skill.json", "inside")
    _registry, lines = load(root)
    assert lines == [registered("inside", path)]


@pytest.mark.timeout(20)
def test_a_fifo_named_skill_json_is_a_parse_error_and_the_walk_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "a").mkdir(parents=True)
    os.mkfifo(root / "a" / "skill.json")
    b = write_skill(root / "b", "b")
    _registry, lines = load(root)
    assert lines == [
        f"skill loader: parse {root / 'a' / 'skill.json'}: not a regular file",
        registered("b", b),
    ]


# --- symlinks ------------------------------------------------------------------------------


def test_a_symlinked_directory_inside_the_tree_is_not_descended(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    real = write_skill(root / "real", "real_one")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    _registry, lines = load(root)
    assert lines == [registered("real_one", real)]


def test_a_symlinked_directory_pointing_outside_the_root_is_not_descended(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    write_skill(tmp_path / "elsewhere" / "sneaky", "sneaky")
    (root / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    registry, lines = load(root)
    assert "sneaky" not in registry
    assert lines == []


@pytest.mark.timeout(20)
def test_a_symlink_loop_in_the_tree_neither_hangs_nor_crashes_the_loader(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    a = write_skill(root / "a", "a")
    (root / "a" / "up").symlink_to(root, target_is_directory=True)  # loop to the root
    (root / "a" / "self").symlink_to(root / "a" / "self")  # self loop
    (root / "b").mkdir()
    (root / "b" / "x").symlink_to(root / "b" / "y")
    (root / "b" / "y").symlink_to(root / "b" / "x")  # two-link loop
    (root / "c").mkdir()
    (root / "c" / "skill.json").symlink_to(root / "c" / "skill.json")  # manifest loops to itself
    d = write_skill(root / "d", "d")
    registry, lines = load(root)
    assert sorted(registry.skills) == ["a", "d"]
    assert lines[0] == registered("a", a)
    assert lines[1].startswith(f"skill loader: parse {root / 'c' / 'skill.json'}: ")
    assert lines[2] == registered("d", d)
    assert len(lines) == 3


def test_a_manifest_symlinked_outside_the_root_is_refused(tmp_path: Path) -> None:
    elsewhere = write_skill(tmp_path / "elsewhere", "outsider")
    root = tmp_path / "skills"
    (root / "a").mkdir(parents=True)
    link = root / "a" / "skill.json"
    link.symlink_to(elsewhere)
    (root / "a" / "run").write_text(SCRIPT)
    (root / "a" / "run").chmod(0o755)
    registry, lines = load(root)
    assert "outsider" not in registry
    real = os.path.realpath(elsewhere)
    assert lines == [
        f"skill loader: parse {link}: symlink to {real} escapes allowlist root {root}",
    ]


def test_a_dangling_manifest_symlink_is_a_parse_error(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "a").mkdir(parents=True)
    link = root / "a" / "skill.json"
    link.symlink_to(tmp_path / "gone.json")
    registry, lines = load(root)
    assert len(registry) == 0
    assert len(lines) == 1
    assert lines[0].startswith(f"skill loader: parse {link}: broken symlink: ")


def test_a_manifest_symlinked_to_a_file_inside_the_root_is_loaded_under_the_link_path(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    shared = write_skill(root / "shared", "shared")
    (root / "z").mkdir()
    link = root / "z" / "skill.json"
    link.symlink_to(shared)
    _, lines = load(root)
    assert lines == [registered("shared", shared), duplicate("shared", link)]


# --- unreadable folders --------------------------------------------------------------------


def test_an_unreadable_subfolder_is_logged_and_skipped_and_the_walk_goes_on(
    world_readable_dir: Path,
) -> None:
    root = world_readable_dir / "skills"
    a = write_skill(root / "a", "a")
    write_skill(root / "b", "b")
    c = write_skill(root / "c", "c")
    (root / "b").chmod(0)
    assert stat.S_IMODE((root / "b").stat().st_mode) == 0

    def load_as_nobody() -> dict[str, Any]:
        registry, lines = load(root)
        return {"names": sorted(registry.skills), "lines": lines}

    result = run_unprivileged(load_as_nobody)
    assert result["names"] == ["a", "c"]
    assert result["lines"] == [
        registered("a", a),
        f"skill loader: skip unreadable dir {root / 'b'}: Permission denied",
        registered("c", c),
    ]


# --- where the lines go, and the dirs from the environment ---------------------------------


def test_build_registry_sends_each_line_to_the_sink_as_it_happens(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "a", "a")
    lines: list[str] = []
    registry = build_registry([str(root), "rel"], [], sink=lines.append)
    assert lines == [registered("a", path), 'skill loader: skip non-absolute dir "rel"']
    assert registry.report.lines == [line.removeprefix("skill loader: ") for line in lines]


def test_without_a_sink_the_lines_go_to_the_loader_logger_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "skills"
    path = write_skill(root / "a", "a")
    with caplog.at_level(logging.INFO, logger="ongrid_skills.loader"):
        build_registry([str(root)], [])
    records = [r for r in caplog.records if r.name == "ongrid_skills.loader"]
    assert [r.getMessage() for r in records] == [registered("a", path)]
    assert {r.levelno for r in records} == {logging.INFO}


def test_the_external_dirs_variable_feeds_the_loader_with_both_separators(
    tmp_path: Path,
) -> None:
    one = write_skill(tmp_path / "one" / "a", "a")
    two = write_skill(tmp_path / "two" / "b", "b")
    value = f" {tmp_path / 'one'} :, ,{tmp_path / 'missing'}, relative/dir :{tmp_path / 'two'}: "
    environ = {"ONGRID_SKILLS_EXTERNAL_DIRS": value, "ONGRID_BUNDLED_SKILLS": "0"}
    settings = Settings.load(environ=environ)
    lines: list[str] = []
    registry = ongrid_skills.load_registry(persona_dirs=[], settings=settings, log=lines.append)
    assert sorted(registry.skills) == ["a", "b"]
    assert lines == [
        registered("a", one),
        f"skill loader: dir {tmp_path / 'missing'} not present, skipping",
        'skill loader: skip non-absolute dir "relative/dir"',
        registered("b", two),
    ]


# --- the report's stable codes -------------------------------------------------------------


def test_every_skipped_file_and_dir_carries_the_stable_code_of_why(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "fifo").mkdir(parents=True)
    os.mkfifo(root / "fifo" / "skill.json")
    (root / "big").mkdir()
    (root / "big" / "skill.json").write_text(" " * (2 * 1024 * 1024))
    (root / "dangling").mkdir()
    (root / "dangling" / "skill.json").symlink_to(tmp_path / "gone.json")
    (root / "escape").mkdir()
    (root / "escape" / "skill.json").symlink_to(write_skill(tmp_path / "elsewhere", "outsider"))
    write_skill(root / "one", "same")
    write_skill(root / "two", "same")
    (root / "typo").mkdir()
    (root / "typo" / "skill.json").write_text("{")
    write_skill(root / "wrong", "Bad-Name")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    registry, _lines = load(root, "relative/dir", tmp_path / "absent", a_file)
    codes = {
        os.path.relpath(item.path, tmp_path): (item.code, item.to_dict()["code"])
        for item in registry.report.skipped
    }
    assert {path: code for path, (code, shown) in codes.items() if code == shown} == {
        "skills/big/skill.json": "too_large",
        "skills/dangling/skill.json": "unreadable",
        "skills/escape/skill.json": "symlink_escapes_root",
        "skills/fifo/skill.json": "unreadable",
        "skills/two/skill.json": "name_taken",
        "skills/typo/skill.json": "parse_error",
        "skills/wrong/skill.json": "invalid_manifest",
        os.path.relpath("relative/dir", tmp_path): "dir_not_absolute",
        "absent": "dir_missing",
        "a-file": "dir_not_a_directory",
    }
    wrong = next(i for i in registry.report.skipped if i.path.endswith("wrong/skill.json"))
    assert wrong.to_dict()["field"] == "name"
