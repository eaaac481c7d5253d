"""Shell completion through click's protocol, as bash, zsh and fish call it on every Tab:
skill names for `run` and `show`, persona names for `--persona`, loaded quietly."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pexpect
import pytest

from tests.support.processes import CLI
from tests.support.skills import MakeSkill, write_persona

OK = "#!/bin/sh\ncat >/dev/null\necho '{}'\n"


def complete(
    shell: str, words: str, cword: int | str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Ask the console script for completions the way the shell's sourced function does."""
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "_ONGRID_SKILLS_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
        **env,
    }
    return subprocess.run([CLI], capture_output=True, text=True, env=environ, cwd=cwd, timeout=30)


@pytest.fixture
def catalogue(make_skill: MakeSkill, skills_root: Path, tmp_path: Path) -> dict[str, str]:
    make_skill("disk_cleaner", OK, description="Free up disk.", **{"class": "mutating"})
    make_skill("disk_usage", OK, description="How full a disk is.")
    make_skill("host_info", OK, description="This host.")
    personas = tmp_path / "personas"
    write_persona(personas, "ops_responder", "mutating-with-confirm")
    write_persona(personas, "observer")
    return {"ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root), "ONGRID_PERSONAS_DIRS": str(personas)}


def test_bash_completes_skill_names_for_run_and_show_without_a_word_on_stderr(
    catalogue: dict[str, str],
) -> None:
    run = complete("bash", "ongrid-skills run di", 2, catalogue)
    assert run.returncode == 0
    assert run.stdout.splitlines() == ["plain,disk_cleaner", "plain,disk_usage"]
    assert run.stderr == ""  # no loader line, no log line
    show = complete("bash", "ongrid-skills show ", 2, catalogue)
    assert show.stdout.splitlines() == ["plain,disk_cleaner", "plain,disk_usage", "plain,host_info"]


def test_zsh_and_fish_get_each_name_with_its_description(catalogue: dict[str, str]) -> None:
    zsh = complete("zsh", "ongrid-skills run host", 2, catalogue)
    assert zsh.stdout.splitlines() == ["plain", "host_info", "This host."]
    fish = complete("fish", "ongrid-skills show disk_c", "disk_c", catalogue)
    assert fish.stdout.splitlines() == ["plain,disk_cleaner\tFree up disk."]


def test_a_skills_dir_typed_on_the_line_is_where_names_come_from(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("only_here", OK)
    words = f"ongrid-skills -q -d {skills_root} run on"
    done = complete("bash", words, len(words.split()) - 1, {})
    assert done.stdout.splitlines() == ["plain,only_here"]


def test_persona_options_complete_persona_names(catalogue: dict[str, str]) -> None:
    done = complete("bash", "ongrid-skills run host_info --persona o", 4, catalogue)
    assert done.stdout.splitlines() == ["plain,observer", "plain,ops_responder"]


def test_completion_opens_no_store_and_creates_no_data_dir(
    catalogue: dict[str, str], tmp_path: Path
) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    done = complete("bash", "ongrid-skills run ", 2, catalogue, cwd=cwd)
    assert done.returncode == 0 and done.stdout
    assert list(cwd.iterdir()) == []


def test_a_broken_configuration_completes_nothing_and_prints_nothing(
    catalogue: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is [not toml")
    done = complete("bash", f"ongrid-skills --config {bad} run ", 4, catalogue)
    assert done.returncode == 0
    assert done.stdout.strip() == ""
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _ongrid_skills_completion ongrid-skills"),
        ("zsh", "#compdef ongrid-skills"),
        ("fish", "complete --no-files --command ongrid-skills"),
    ],
)
def test_each_shell_gets_its_completion_script(shell: str, marker: str) -> None:
    environ = {"PATH": os.environ["PATH"], "_ONGRID_SKILLS_COMPLETE": f"{shell}_source"}
    done = subprocess.run([CLI], capture_output=True, text=True, env=environ, timeout=30)
    assert done.returncode == 0
    assert marker in done.stdout
    assert "_ONGRID_SKILLS_COMPLETE" in done.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_sourced_bash_script_fills_compreply(catalogue: dict[str, str]) -> None:
    """The whole path: bash sources the script, the function runs the command, COMPREPLY fills."""
    script = (
        'source <(_ONGRID_SKILLS_COMPLETE=bash_source "$CLI")\n'
        "COMP_WORDS=(ongrid-skills show disk_)\nCOMP_CWORD=2\n"
        '_ongrid_skills_completion "$CLI"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "CLI": CLI,
        **catalogue,
    }
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        env=environ,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["disk_cleaner", "disk_usage"]


# ---- run's KEY=VALUE words ------------------------------------------------------------------
TUNER_SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["fast", "safe"]},
        "dry_run": {"type": "boolean"},
        "path": {"type": "string", "description": "Where to look."},
        "tags": {"type": "array", "items": {"type": "string"}},
        "odd key": {"type": "string"},  # a blank: cannot be typed as KEY=VALUE
    },
}


@pytest.fixture
def tuner(catalogue: dict[str, str], make_skill: MakeSkill) -> dict[str, str]:
    make_skill("tuner", OK, schema=TUNER_SCHEMA)
    return catalogue


def test_after_the_skill_name_its_keys_complete_not_skill_names_again(
    tuner: dict[str, str],
) -> None:
    done = complete("bash", "ongrid-skills run tuner ", 3, tuner)
    assert done.stdout.splitlines() == [
        "plain,mode=",
        "plain,dry_run=",
        "plain,path=",
        "plain,tags=",
    ]
    assert complete("bash", "ongrid-skills run tuner d", 3, tuner).stdout == "plain,dry_run=\n"
    fish = complete("fish", "ongrid-skills run tuner pa", "pa", tuner)
    assert fish.stdout.splitlines() == ["plain,path=\tWhere to look."]


def test_a_key_given_is_not_offered_again_unless_it_is_an_array(tuner: dict[str, str]) -> None:
    # bash hands "path=/x tags=a" over in pieces: path = /x tags = a
    words = "ongrid-skills run tuner path = /x tags = a "
    done = complete("bash", words, len(words.split()), tuner)
    assert done.stdout.splitlines() == ["plain,mode=", "plain,dry_run=", "plain,tags="]
    zsh = complete("zsh", "ongrid-skills run tuner path=/x ", 4, tuner)
    assert "path=" not in zsh.stdout.splitlines()


def test_after_key_equals_the_values_of_an_enum_or_a_boolean_complete(
    tuner: dict[str, str],
) -> None:
    # bash: the word is split at "=" and only what follows it is replaced.
    assert complete("bash", "ongrid-skills run tuner mode =", 4, tuner).stdout.splitlines() == [
        "plain,fast",
        "plain,safe",
    ]
    assert complete("bash", "ongrid-skills run tuner dry_run = f", 5, tuner).stdout == (
        "plain,false\n"
    )
    # zsh and fish: the whole word.
    zsh = complete("zsh", "ongrid-skills run tuner dry_run=", 3, tuner)
    assert zsh.stdout.splitlines() == ["plain", "dry_run=true", "_", "plain", "dry_run=false", "_"]
    fish = complete("fish", "ongrid-skills run tuner mode=s", "mode=s", tuner)
    assert fish.stdout.splitlines() == ["plain,mode=safe"]
    assert complete("bash", "ongrid-skills run tuner path =", 4, tuner).stdout.strip() == ""


def test_json_args_an_unknown_skill_or_key_complete_nothing(tuner: dict[str, str]) -> None:
    for words, cword in [
        ("ongrid-skills run tuner {", 3),
        ("ongrid-skills run no_such_skill ", 3),
        ("ongrid-skills run tuner nokey =", 4),
    ]:
        done = complete("bash", words, cword, tuner)
        assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", ""), words


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_in_an_interactive_bash_a_completed_key_takes_its_value_without_a_space(
    tuner: dict[str, str],
) -> None:
    """Real readline: Tab after "pa" writes "path=" and the next character joins the word."""

    environ = {
        "PATH": f"{Path(CLI).parent}:{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
        "PS1": "READY> ",
        "TERM": "dumb",
        **tuner,
    }
    shell = pexpect.spawn(
        "bash", ["--norc", "--noprofile", "-i"], env=environ, encoding="utf-8", timeout=30
    )
    try:
        shell.expect_exact("READY> ")
        shell.sendline("source <(_ONGRID_SKILLS_COMPLETE=bash_source ongrid-skills)")
        shell.expect_exact("READY> ")
        shell.send("ongrid-skills run tuner pa\t")
        shell.expect_exact("pa")
        shell.send("Z")
        shell.expect(r"th=(\s*)Z")
        assert shell.match.group(1) == ""
        shell.send("\x03")  # Ctrl-C: the line is dropped, never run
        shell.expect_exact("READY> ")
        shell.send("ongrid-skills run tuner mode=\t")
        shell.expect_exact("mode=")
        shell.send("\t")  # two choices: the second Tab lists them
        shell.expect(r"fast\s+safe")
        shell.send("\x03")
        shell.expect_exact("READY> ")
    finally:
        shell.close(force=True)
