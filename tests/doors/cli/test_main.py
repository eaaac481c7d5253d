"""The ongrid-skills command, driven as an operator would: a real process per invocation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import CLI
from tests.support.skills import EXAMPLE_SKILLS, MakeSkill

OK = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\": true}'\n"


def cli(
    *args: str,
    root: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30,
) -> subprocess.CompletedProcess[str]:
    environ = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    if root is not None:
        environ["ONGRID_SKILLS_EXTERNAL_DIRS"] = str(root)
    environ.update(env or {})
    return subprocess.run(
        [CLI, *args], input=stdin, capture_output=True, text=True, env=environ, timeout=timeout
    )


def test_list_json_prints_the_skills_body_sorted_by_name(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("zeta", OK, category="ops", **{"class": "mutating"})
    make_skill("alpha", OK)
    done = cli("list", "--json", root=skills_root)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["total"] == 2
    assert [item["name"] for item in body["items"]] == ["alpha", "zeta"]
    assert set(body["items"][0]) == {
        "name",
        "description",
        "class",
        "category",
        "kind",
        "source",
        "schema",
        "timeout_seconds",
        "available",
        "unavailable_reason",
        "when_to_use",
        "extra",
        "scope",
    }
    assert body["items"][1]["class"] == "mutating"
    assert body["items"][0]["schema"] == {"type": "object", "properties": {}}
    assert body["items"][0]["timeout_seconds"] == 30
    assert done.stderr == "loaded 2 skills\n"  # the loader lines: -v (test_verbosity.py)


def test_list_filters_by_category_and_by_persona(make_skill: MakeSkill, skills_root: Path) -> None:
    make_skill("fixer", OK, category="ops", **{"class": "mutating"})
    make_skill("looker", OK, category="diag")
    by_category = json.loads(cli("list", "--json", "--category", "ops", root=skills_root).stdout)
    assert [i["name"] for i in by_category["items"]] == ["fixer"]
    as_default = json.loads(cli("list", "--json", "--persona", "default", root=skills_root).stdout)
    assert [i["name"] for i in as_default["items"]] == ["looker"]


def test_show_prints_one_skill_with_its_schema(make_skill: MakeSkill, skills_root: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    make_skill("counter", OK, schema=schema)
    done = cli("show", "counter", "--json", root=skills_root)
    assert json.loads(done.stdout)["schema"] == schema
    human = cli("show", "counter", root=skills_root)
    assert '"integer"' in human.stdout and "entry:" in human.stdout
    missing = cli("show", "nope", root=skills_root)
    assert missing.returncode == 2 and "unknown skill" in missing.stderr


def test_run_prints_the_result_verbatim_and_exits_zero(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    make_skill("spaced", '#!/bin/sh\ncat >/dev/null\necho \'{"b": 1,   "a": [1, 2]}\'\n')
    done = cli("run", "spaced", "{}", root=skills_root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"b": 1,   "a": [1, 2]}\n'


def test_run_reads_args_from_stdin_with_a_dash(make_skill: MakeSkill, skills_root: Path) -> None:
    make_skill("echo_args", "#!/bin/sh\ncat\n")
    done = cli("run", "echo_args", "-", root=skills_root, stdin='{"path": "/var/tmp"}')
    assert json.loads(done.stdout) == {"path": "/var/tmp"}


def test_run_json_prints_the_whole_execution(make_skill: MakeSkill, skills_root: Path) -> None:
    make_skill("failing", "#!/bin/sh\ncat >/dev/null\necho boom >&2\nexit 7\n")
    done = cli("run", "failing", "{}", "--json", root=skills_root)
    assert done.returncode == 1
    execution = json.loads(done.stdout)
    assert execution["status"] == "failed"
    assert execution["error"]["code"] == "exit_status"
    assert execution["exit_code"] == 7
    assert execution["stderr_tail"] == "boom\n"
    for key in ("id", "skill", "args", "result", "created_at", "started_at", "finished_at"):
        assert key in execution


def test_run_streams_skill_stderr_to_the_terminal_while_it_runs(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "go"
    script = (
        f"#!/bin/sh\ncat >/dev/null\necho first line >&2\n"
        f"i=0; while [ ! -e {gate} ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done\n"
        "echo '{\"ok\": true}'\n"
    )
    make_skill("slow", script)
    environ = {
        "PATH": os.environ["PATH"],
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(skills_root),
    }
    proc = subprocess.Popen(
        [CLI, "-q", "run", "slow", "{}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # arrives while the skill still waits for the gate file
    assert line == "first line\n"
    assert proc.poll() is None
    gate.touch()
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert json.loads(out) == {"ok": True}


@pytest.mark.parametrize(
    ("script", "code"),
    [
        ("#!/bin/sh\ncat >/dev/null\nexit 3\n", 1),
        ("#!/bin/sh\ncat >/dev/null\necho not json\n", 1),
        ("#!/bin/sh\ncat >/dev/null\nkill -SEGV $$\n", 1),
        ("#!/bin/sh\nexec sleep 30\n", 124),
    ],
)
def test_run_exit_codes_follow_the_outcome(
    make_skill: MakeSkill, skills_root: Path, script: str, code: int
) -> None:
    make_skill("outcome", script, timeout_seconds=1, env_allow=["PATH"])
    done = cli("run", "outcome", "{}", root=skills_root)
    assert done.returncode == code, done.stderr


def test_run_with_invalid_args_exits_2_and_lists_the_violations(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    make_skill("needs_n", OK, schema=schema)
    done = cli("run", "needs_n", '{"n": "x"}', root=skills_root)
    assert done.returncode == 2
    assert "/n" in done.stderr
    garbage = cli("run", "needs_n", "{not json", root=skills_root)
    assert garbage.returncode == 2 and "not valid JSON" in garbage.stderr


def test_run_with_a_key_given_twice_exits_2_and_runs_nothing(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    make_skill("touches", f"#!/bin/sh\ncat >/dev/null\n: > {marker}\necho '{{}}'\n")
    done = cli("run", "touches", '{"path": "/tmp", "\\u0070ath": "/"}', root=skills_root)
    assert done.returncode == 2
    assert 'duplicate key "path" at $.path' in done.stderr
    assert not marker.exists()
    unknown = cli("run", "nope", "{}", root=skills_root)
    assert unknown.returncode == 2


def test_a_mutating_skill_without_yes_exits_3_and_nothing_runs(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    folder = make_skill(
        "mutator", "#!/bin/sh\n: > ran\ncat >/dev/null\necho '{}'\n", **{"class": "mutating"}
    )
    done = cli("run", "mutator", "{}", root=skills_root)
    assert done.returncode == 3
    assert "--yes" in done.stderr
    assert not (folder / "ran").exists()
    assert cli("run", "mutator", "{}", "--yes", root=skills_root).returncode == 0
    assert (folder / "ran").exists()


def test_a_read_only_persona_refuses_mutating_even_with_yes(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    folder = make_skill("mutator", "#!/bin/sh\n: > ran\necho '{}'\n", **{"class": "mutating"})
    done = cli("run", "mutator", "{}", "--yes", "--persona", "default", root=skills_root)
    assert done.returncode == 3
    assert "read-only" in done.stderr
    assert not (folder / "ran").exists()


def test_a_dangerous_skill_needs_yes_and_the_explicit_override(
    make_skill: MakeSkill, skills_root: Path
) -> None:
    folder = make_skill("wipe", "#!/bin/sh\n: > ran\necho '{}'\n", **{"class": "dangerous"})
    assert cli("run", "wipe", "{}", "--yes", root=skills_root).returncode == 3
    assert cli("run", "wipe", "{}", "--i-know-it-is-dangerous", root=skills_root).returncode == 3
    assert not (folder / "ran").exists()
    done = cli("run", "wipe", "{}", "--yes", "--i-know-it-is-dangerous", root=skills_root)
    assert done.returncode == 0
    assert "--i-know-it-is-dangerous" in done.stderr  # logged
    assert (folder / "ran").exists()


@pytest.mark.parametrize("lang", ["sh", "python"])
def test_new_scaffolds_a_skill_that_validates_and_runs_at_once(tmp_path: Path, lang: str) -> None:
    made = cli("new", "greeter", "--lang", lang, "--dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    folder = Path(made.stdout.strip())
    assert (folder / "skill.json").exists() and (folder / "test-args.json").exists()
    checked = cli("validate", str(tmp_path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout == ""
    args = (folder / "test-args.json").read_text()
    done = cli("run", "greeter", "-", root=tmp_path, stdin=args)
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), dict)


def test_new_refuses_a_bad_name_or_an_existing_folder(tmp_path: Path) -> None:
    assert cli("new", "Bad-Name", "--dir", str(tmp_path)).returncode == 2
    assert cli("new", "twice", "--dir", str(tmp_path)).returncode == 0
    again = cli("new", "twice", "--dir", str(tmp_path))
    assert again.returncode == 2 and "already exists" in again.stderr


def test_the_bundled_examples_validate_clean() -> None:
    examples = EXAMPLE_SKILLS
    done = cli("validate", str(examples))
    assert done.returncode == 0, done.stdout
    assert done.stdout == ""


def test_help_is_available_on_every_command() -> None:
    for command in ([], ["list"], ["show"], ["run"], ["validate"], ["new"]):
        done = cli(*command, "--help")
        assert done.returncode == 0 and "Usage:" in done.stdout


def test_run_applies_the_readable_roots_of_the_settings(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "app.log").write_text("ready\n")
    (tmp_path / "secret").write_text("s3cr3t\n")
    env = {
        "ONGRID_BUNDLED_SKILLS": "1",
        "ONGRID_DATA_DIR": str(tmp_path / "data"),
        "ONGRID_BUILTIN_READ_PATHS": str(logs),
    }
    done = cli("run", "tail_file", json.dumps({"path": str(logs / "app.log")}), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["lines"] == ["ready"]
    args = json.dumps({"path": str(tmp_path / "secret")})
    refused = cli("run", "tail_file", args, "--json", env=env)
    assert refused.returncode == 1, refused.stderr
    execution = json.loads(refused.stdout)
    assert execution["error"]["code"] == "forbidden_path"
    assert "s3cr3t" not in refused.stdout + refused.stderr


def test_a_malformed_network_rule_stops_every_command_with_a_clear_message() -> None:
    done = cli("list", env={"ONGRID_BUILTIN_NET_DENY": "10.0.0.0/33"})
    assert done.returncode == 2
    assert "builtin_net_deny: '10.0.0.0/33'" in done.stderr
    assert "Traceback" not in done.stderr


#: The console script's entry point, then, at exit, how many objects the collector left frozen.
FROZEN_AT_EXIT = """
import atexit, gc, sys
from ongrid_skills.doors.cli.main import main

atexit.register(lambda: print("frozen", gc.get_freeze_count()))
sys.argv[0] = "ongrid-skills"
sys.exit(main())
"""


@pytest.mark.parametrize("args", [("--version",), ("run", "nope", "{}")], ids=["ok", "failing"])
def test_a_command_ends_with_its_heap_frozen_so_the_exit_skips_the_collectors_passes(
    args: tuple[str, ...],
) -> None:
    # The interpreter's exit collects cycles among whatever is left (the modules, a server's
    # app): 0.3 s for serve on an idle machine, seconds on a loaded one, between its "stopped"
    # line and its end. Frozen objects are freed without those passes.
    environ = {"PATH": os.environ["PATH"], "ONGRID_BUNDLED_SKILLS": "0"}
    done = subprocess.run(
        [sys.executable, "-c", FROZEN_AT_EXIT, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=30,
    )
    assert done.returncode == (0 if args == ("--version",) else 2), done.stderr
    frozen = int(done.stdout.rsplit("frozen ", 1)[1])
    assert frozen > 10_000, done.stdout
