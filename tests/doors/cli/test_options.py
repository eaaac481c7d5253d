"""Quiet by default, loud when asked: one loader summary line, the SPEC §3 lines under -v or
ONGRID_LOG_LEVEL, -q/-v/--data-dir at any position, and an unknown skill that failed to load
named with the loader's reason. Exact outputs in pipes; the terminal through pexpect."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.support.cli import cli_env, run_cli
from tests.support.processes import CLI
from tests.support.skills import write_skill
from tests.support.sockets import free_port


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Two skills and one that cannot load (its entry is not executable)."""
    skills = tmp_path / "skills"
    write_skill(skills, "alpha")
    write_skill(skills, "beta")
    noexec = write_skill(skills, "noexec")
    (noexec / "run").chmod(0o644)
    return skills


def lines_of(root: Path) -> list[str]:
    return [
        f'skill loader: registered subprocess skill "alpha" from {root}/alpha/skill.json',
        f'skill loader: registered subprocess skill "beta" from {root}/beta/skill.json',
        f'skill loader: build "noexec": entry {root}/noexec/run is not executable '
        f"(in {root}/noexec/skill.json)",
    ]


SUMMARY = "loaded 2 skills, 1 error (ongrid-skills validate for details)\n"


def test_a_command_prints_one_summary_line_on_stderr_and_its_answer_on_stdout(root: Path) -> None:
    done = run_cli("list", ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert done.returncode == 0
    assert done.stderr == SUMMARY
    assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == ["alpha", "beta"]


def test_the_summary_counts_what_was_skipped(tmp_path: Path, root: Path) -> None:
    clean = tmp_path / "clean"
    write_skill(clean, "one")
    assert run_cli("list", ONGRID_SKILLS_EXTERNAL_DIRS=str(clean)).stderr == "loaded 1 skill\n"
    missing = f"{clean}:{tmp_path / 'absent'}"
    skipped = run_cli("list", ONGRID_SKILLS_EXTERNAL_DIRS=missing)
    assert skipped.stderr == "loaded 1 skill, 1 dir skipped (-v for details)\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["-q", "list"],
        ["list", "-q"],
        ["list", "--quiet", "--json"],
        ["-v", "list", "-q"],  # the last one given wins
        ["--verbose", "list", "--quiet"],
    ],
    ids=" ".join,
)
def test_quiet_at_any_position_removes_the_summary(root: Path, argv: list[str]) -> None:
    done = run_cli(*argv, ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert done.returncode == 0
    assert done.stderr == ""


@pytest.mark.parametrize(
    "argv",
    [["-v", "list"], ["list", "-v"], ["list", "--json", "--verbose"], ["-q", "list", "-v"]],
    ids=" ".join,
)
def test_verbose_at_any_position_prints_the_contract_lines(root: Path, argv: list[str]) -> None:
    done = run_cli(*argv, ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert done.returncode == 0
    assert done.stderr.splitlines() == lines_of(root)


def test_the_log_level_setting_shows_the_lines_and_the_command_line_wins_over_it(
    root: Path, tmp_path: Path
) -> None:
    for level in ("info", "debug", "INFO"):
        done = run_cli("list", ONGRID_SKILLS_EXTERNAL_DIRS=str(root), ONGRID_LOG_LEVEL=level)
        assert done.stderr.splitlines() == lines_of(root), level
    warning = run_cli("list", ONGRID_SKILLS_EXTERNAL_DIRS=str(root), ONGRID_LOG_LEVEL="warning")
    assert warning.stderr == SUMMARY
    quiet = run_cli("list", "-q", ONGRID_SKILLS_EXTERNAL_DIRS=str(root), ONGRID_LOG_LEVEL="info")
    assert quiet.stderr == ""
    config = tmp_path / "ongrid.toml"
    config.write_text(f'[ongrid]\nexternal_dirs = ["{root}"]\nlog_level = "info"\n')
    from_file = run_cli("--config", str(config), "list")
    assert from_file.stderr.splitlines() == lines_of(root)


def test_run_takes_the_flags_after_its_arguments(root: Path) -> None:
    loud = run_cli("run", "alpha", "{}", "-v", ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert loud.returncode == 0
    assert loud.stdout == '{"ok": true}\n'
    assert loud.stderr.splitlines() == lines_of(root)
    quiet = run_cli("run", "alpha", "-q", ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, '{"ok": true}\n', "")


def test_nested_commands_take_the_flags_too(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = run_cli("token", "create", "--role", "admin", "--name", "a", "--data-dir", str(data))
    assert made.returncode == 0, made.stderr
    for argv in (["token", "list", "-v"], ["token", "-v", "list"], ["-v", "token", "list"]):
        done = run_cli(*argv, ONGRID_DATA_DIR=str(data))
        assert done.stderr.startswith(f"ongrid-skills: store: data dir {data} "), argv
    help_text = run_cli("audit", "verify", "--help").stdout
    assert "--data-dir" in help_text and "--quiet" in help_text and "--verbose" in help_text


@pytest.mark.parametrize("flags", [[], ["-q"], ["-v"]], ids=lambda f: " ".join(f) or "plain")
def test_a_skill_that_failed_to_load_is_unknown_with_the_loaders_reason(
    root: Path, flags: list[str]
) -> None:
    for argv in (["run", "noexec", "{}"], ["show", "noexec"]):
        done = run_cli(*argv, *flags, ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.splitlines()[-1] == (
            f"ongrid-skills: unknown skill 'noexec': it failed to load: entry {root}/noexec/run "
            f"is not executable (in {root}/noexec/skill.json)"
        )
    never = run_cli("run", "never_written", *flags, ONGRID_SKILLS_EXTERNAL_DIRS=str(root))
    assert never.stderr.splitlines()[-1] == "ongrid-skills: unknown skill 'never_written'"


def test_on_a_terminal_the_summary_is_the_same_single_line(root: Path) -> None:
    """stderr a terminal (pexpect's pseudo-terminal carries both streams)."""
    child = pexpect.spawn(
        CLI, ["list"], env=cli_env(ONGRID_SKILLS_EXTERNAL_DIRS=str(root)), encoding="utf-8"
    )
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    assert child.exitstatus == 0
    output = child.before.replace("\r\n", "\n")
    assert output.count("loaded 2 skills, 1 error (ongrid-skills validate for details)") == 1
    assert "skill loader:" not in output
    assert "alpha" in output and "beta" in output


def test_serve_keeps_every_loader_line_on_its_log(root: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [CLI, "serve", "--port", str(free_port())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(ONGRID_SKILLS_EXTERNAL_DIRS=str(root), ONGRID_DATA_DIR=str(tmp_path / "d")),
    )
    assert proc.stderr is not None
    try:
        seen = [proc.stderr.readline().rstrip("\n") for _ in range(4)]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert seen[0].startswith(f"ongrid-skills: store: data dir {tmp_path / 'd'} ")
    assert seen[1:] == lines_of(root)
    assert os.path.isfile(tmp_path / "d" / "ongrid.db")
