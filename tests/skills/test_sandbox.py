"""Sandbox declarations (SPEC §20): ``sandbox`` in skill.json and on SKILL.md ``exec:`` tools,
validated strictly by the real loader; how a declaration combines with the operator's default
for the skill's class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import ConfigError
from ongrid_skills.settings import Settings
from ongrid_skills.skills.sandbox import SandboxSpec, effective
from tests.support.cli import run_cli
from tests.support.skills import load, write_exec, write_skill, write_skill_md


def refusal(lines: list[str]) -> str:
    found = [line for line in lines if line.startswith("skill loader: build")]
    assert len(found) == 1, lines
    return found[0]


def test_a_skill_json_sandbox_is_loaded_shown_and_hashed(tmp_path: Path) -> None:
    declared = {"profile": "strict", "read": ["/srv/data"], "write": ["/var/cache/app"]}
    write_skill(tmp_path / "a", "clean_cache", sandbox=declared)
    write_skill(tmp_path / "b", "clean_cache")
    confined, _ = load(external=[tmp_path / "a"])
    plain, _ = load(external=[tmp_path / "b"])
    skill = confined.get("clean_cache")
    assert skill.sandbox == SandboxSpec("strict", ("/srv/data",), ("/var/cache/app",), False)
    assert skill.summary()["sandbox"] == {**declared, "network": False}
    assert "sandbox" not in plain.get("clean_cache").summary()
    # Approvals and a worker's signed inventory bind it: another declaration, another hash.
    assert skill.load_hash != plain.get("clean_cache").load_hash


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("strict", "must be an object"),
        ({}, "profile is required"),
        ({"profile": "tight"}, "profile must be strict, host-read or none"),
        ({"profile": "strict", "network": "no"}, "network must be true or false"),
        ({"profile": "strict", "read": "/srv"}, "read must be a list of absolute paths"),
        ({"profile": "strict", "write": ["var/cache"]}, "is not an absolute path"),
        ({"profile": "strict", "read": ["/srv/../etc"]}, "is not normalised"),
        ({"profile": "strict", "netwrok": True}, "unknown key 'netwrok'"),
        ({"profile": "none", "write": ["/tmp"]}, "profile none confines nothing"),
    ],
)
def test_a_bad_skill_json_sandbox_is_a_build_error_naming_the_field(
    tmp_path: Path, declared: Any, message: str
) -> None:
    write_skill(tmp_path, "clean_cache", sandbox=declared)
    registry, lines = load(external=[tmp_path])
    assert "clean_cache" not in registry
    line = refusal(lines)
    assert 'build "clean_cache": sandbox' in line and message in line


def test_a_skill_md_exec_tool_declares_a_sandbox_and_a_builtin_one_cannot(tmp_path: Path) -> None:
    folder = tmp_path / "native"
    write_skill_md(
        folder,
        "disk",
        {
            "name": "disk",
            "description": "Disk tools.",
            "tools": [
                {
                    "name": "disk_report",
                    "impl": "exec:report.sh",
                    "sandbox": {"profile": "host-read", "network": True},
                }
            ],
        },
    )
    write_exec(folder / "disk", "report.sh")
    registry, _ = load(native=[folder])
    assert registry.get("disk_report").sandbox == SandboxSpec("host-read", network=True)

    bad = tmp_path / "bad"
    write_skill_md(
        bad,
        "probe",
        {
            "name": "probe",
            "description": "A probe.",
            "tools": [
                {
                    "name": "probe_it",
                    "impl": "builtin:net.probe_tcp",
                    "sandbox": {"profile": "strict"},
                }
            ],
        },
    )
    registry, lines = load(native=[bad])
    assert "probe_it" not in registry
    assert "sandbox needs an exec: tool" in refusal(lines)


def test_a_skill_may_tighten_the_operators_default_but_not_loosen_it() -> None:
    declared_none = SandboxSpec("none")
    host = SandboxSpec("host-read", write=("/var/cache",))
    assert effective(None, "strict").profile == "strict"
    assert effective(declared_none, "strict").profile == "strict"
    # Raised to the default, the skill keeps the paths it declared (what it needs, shown).
    assert effective(host, "strict") == SandboxSpec("strict", write=("/var/cache",))
    assert effective(SandboxSpec("strict"), "none").profile == "strict"
    assert effective(host, "host-read") is host
    # The operator may let skills loosen their class's default.
    assert effective(declared_none, "strict", may_loosen=True).profile == "none"


def test_the_sandbox_defaults_per_class_are_settings() -> None:
    settings = Settings.load(
        {"ONGRID_SANDBOX_DEFAULT_MUTATING": "Strict", "ONGRID_SANDBOX_SKILLS_MAY_LOOSEN": "yes"}
    )
    assert settings.sandbox_default_mutating == "strict"
    assert settings.sandbox_default_safe == "none"
    assert settings.sandbox_skills_may_loosen is True
    with pytest.raises(ConfigError, match="strict, host-read or none"):
        Settings.load({"ONGRID_SANDBOX_DEFAULT_DANGEROUS": "tight"})


def test_show_says_what_a_skill_may_touch(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "clean_cache", sandbox={"profile": "strict", "write": ["/var/cache/app"]})
    env = {
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    done = run_cli("show", "clean_cache", **env)
    assert done.returncode == 0, done.stderr
    assert "sandbox:         strict, write /var/cache/app, no network" in done.stdout
    as_json = run_cli("show", "clean_cache", "--json", **env)
    assert '"sandbox": {"profile": "strict"' in as_json.stdout


def test_run_applies_the_operators_default_for_the_skills_class(tmp_path: Path) -> None:
    skills, outside = tmp_path / "skills", tmp_path / "outside"
    outside.mkdir()
    script = f"#!/bin/sh\necho x > {outside}/f 2>/dev/null && echo '1' || echo '0'\n"
    write_skill(skills, "touch_outside", script)
    env = {
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    assert run_cli("run", "touch_outside", "--raw", **env).stdout.strip() == "1"
    (outside / "f").unlink()
    strict = run_cli("run", "touch_outside", "--raw", ONGRID_SANDBOX_DEFAULT_SAFE="strict", **env)
    assert strict.stdout.strip() == "0", strict.stderr
    assert not (outside / "f").exists()
