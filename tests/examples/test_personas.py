"""The example personas of examples/personas: the ones the docs name, loaded as `make run` loads
them, offering what their comments promise."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ongrid_skills.governance.gate import offered
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import PermissionMode
from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS, load

EXAMPLE_PERSONAS = EXAMPLE_SKILLS.parent / "personas"
REPO = EXAMPLE_SKILLS.parents[1]


def registry() -> Registry:
    return load(external=[EXAMPLE_SKILLS], personas=[EXAMPLE_PERSONAS], bundled=True)[0]


def offered_names(persona: str) -> set[str]:
    reg = registry()
    who = reg.persona(persona)
    return {name for name, skill in reg.skills.items() if offered(skill, who)}


def test_the_examples_ship_the_three_personas_the_docs_use() -> None:
    assert sorted(p.name for p in EXAMPLE_PERSONAS.glob("*.md")) == [
        "incident_commander.md",
        "ops_responder.md",
        "reporter.md",
    ]
    reg = registry()
    assert reg.persona("ops_responder").permission_mode is PermissionMode.MUTATING_WITH_CONFIRM
    assert reg.persona("incident_commander").permission_mode is PermissionMode.DUAL_SIGN
    assert reg.persona("reporter").permission_mode is PermissionMode.READ_ONLY


def test_the_reporter_is_offered_its_safe_readers_and_nothing_that_changes_the_host() -> None:
    names = offered_names("reporter")
    assert {"disk_usage", "list_processes", "read_journal", "host_info"} <= names
    assert not names & {"disk_cleaner", "process_signal"}


def test_validate_finds_nothing_to_report_in_the_personas() -> None:
    done = subprocess.run(
        [CLI, "validate", str(EXAMPLE_PERSONAS)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""
    assert "0 error(s), 0 warning(s)" in done.stderr


def test_ops_responder_is_offered_the_diagnostics_and_disk_cleaner_never_process_signal() -> None:
    names = offered_names("ops_responder")
    assert {"host_info", "port_check", "log_grep", "disk_cleaner", "probe_tcp"} <= names
    assert "process_signal" not in names
    # Its allow-list is explicit: everything offered is named in it or is a catalogue tool.
    persona = registry().persona("ops_responder")
    assert names - set(persona.tools) <= {"search_skills", "read_skill", "read_skill_file"}


def test_incident_commander_is_offered_every_example_including_the_dangerous_one() -> None:
    names = offered_names("incident_commander")
    assert {"host_info", "port_check", "log_grep", "disk_cleaner", "process_signal"} <= names


def test_make_run_loads_the_example_personas_unless_the_variable_is_set(tmp_path: Path) -> None:
    # The real target, with BIN aimed at a stand-in that prints the environment it was given.
    fake = tmp_path / "bin" / "ongrid-skills"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nenv | grep "^ONGRID_"; echo "args: $*"\n')
    fake.chmod(0o755)

    def make_run(env: dict[str, str]) -> str:
        done = subprocess.run(
            # -o: never rebuild the virtualenv here, whatever its stamp's age.
            ["make", "-s", "-o", ".venv/.installed-run", "run", f"BIN={fake.parent}"],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"PATH": os.environ["PATH"], **env},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = make_run({})
    assert f"ONGRID_PERSONAS_DIRS={EXAMPLE_PERSONAS}\n" in shown
    assert f"ONGRID_SKILLS_EXTERNAL_DIRS={EXAMPLE_SKILLS}\n" in shown
    assert "args: serve --watch\n" in shown
    assert "ONGRID_PERSONAS_DIRS=/etc/p\n" in make_run({"ONGRID_PERSONAS_DIRS": "/etc/p"})


def test_every_persona_the_docs_name_is_shipped_or_bundled() -> None:
    shipped = {p.stem for p in EXAMPLE_PERSONAS.glob("*.md")} | {"default"}
    pattern = re.compile(r'(?:--persona[ =]|persona=|"persona": ")([a-z][a-z0-9_]*)\b')
    # A doc may create one first through the API: a request to /v1/personas whose body names it.
    created = re.compile(
        r'-d \'\{"name": "([a-z][a-z0-9_]*)"[^\']*\'[^\n]*\n\s*[^\n]*/v1/personas\b'
    )
    for doc in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        text = doc.read_text(encoding="utf-8")
        made = set(created.findall(text))
        for name in pattern.findall(text):
            assert name in shipped | made, (
                f"{doc.name} uses the persona {name!r}, which is neither shipped nor created there"
            )
