"""The local execute() path: resolve, gate, validate, run; typed errors for the caller's faults."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

import ongrid_skills
from ongrid_skills import (
    ApprovalRequired,
    Denied,
    Event,
    InvalidArgs,
    Status,
    UnknownPersona,
    UnknownSkill,
)
from ongrid_skills.execution.function_runner import FunctionRunner
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry
from tests.support.skills import MakeSkill, load, write_skill, write_skill_md

ECHO = "#!/bin/sh\ncat\n"
TOUCH = "#!/bin/sh\n: > ran.marker\ncat >/dev/null\necho '{\"ran\": true}'\n"
SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "dry_run": {"type": "boolean", "default": True},
        "depth": {"type": "integer", "minimum": 0},
    },
    "required": ["path"],
    "additionalProperties": False,
}
PERSONAS = {
    "watcher.md": "---\nname: watcher\ndescription: d\nwhen_to_use: w\n---\n",
    "fixer.md": (
        "---\nname: fixer\ndescription: d\nwhen_to_use: w\n"
        "permission_mode: mutating-with-confirm\ndisallowed_tools: ['*_delete']\n---\n"
    ),
}


def registry_of(root: Path, tmp_path: Path) -> ongrid_skills.Registry:
    personas = tmp_path / "personas"
    personas.mkdir(exist_ok=True)
    for name, text in PERSONAS.items():
        (personas / name).write_text(text)
    return ongrid_skills.load_registry(
        external_dirs=[str(root)], persona_dirs=[str(personas)], log=lambda _l: None
    )


def run(registry: ongrid_skills.Registry, name: str, args: Any, **kw: Any) -> Any:
    return asyncio.run(ongrid_skills.execute(registry, name, args, **kw))


def test_the_skill_receives_exactly_the_args_sent_with_no_defaults_injected(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    make_skill("echo_args", ECHO, schema=SCHEMA)
    registry = registry_of(skills_root, tmp_path)
    execution = run(registry, "echo_args", {"path": "/var/cache"})
    assert execution.status is Status.SUCCEEDED
    assert execution.result == {"path": "/var/cache"}
    assert execution.result_text == '{"path":"/var/cache"}'


def test_invalid_args_list_every_violation_with_a_pointer_and_spawn_nothing(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    folder = make_skill("guarded", TOUCH, schema=SCHEMA)
    registry = registry_of(skills_root, tmp_path)
    with pytest.raises(InvalidArgs) as caught:
        run(registry, "guarded", {"dry_run": "yes", "depth": -1, "extra": 1})
    pointers = sorted(v.pointer for v in caught.value.violations)
    assert pointers == ["", "", "/depth", "/dry_run"]
    messages = " ".join(v.message for v in caught.value.violations)
    assert "path" in messages and "extra" in messages
    assert not (folder / "ran.marker").exists()


@pytest.mark.parametrize("args", [[], "x", 3, None])
def test_args_that_are_not_an_object_are_invalid(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path, args: Any
) -> None:
    make_skill("any_args", TOUCH)
    with pytest.raises(InvalidArgs) as caught:
        run(registry_of(skills_root, tmp_path), "any_args", args)
    assert caught.value.violations[0].pointer == ""
    assert "JSON object" in caught.value.violations[0].message


def test_an_unknown_skill_or_persona_raises_not_found(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    make_skill("present", TOUCH)
    registry = registry_of(skills_root, tmp_path)
    with pytest.raises(UnknownSkill):
        run(registry, "absent", {})
    with pytest.raises(UnknownPersona):
        run(registry, "present", {}, persona="nobody")


def test_a_mutating_skill_without_confirmation_needs_approval_and_does_not_run(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    folder = make_skill("mutator", TOUCH, **{"class": "mutating"})
    registry = registry_of(skills_root, tmp_path)
    with pytest.raises(ApprovalRequired) as caught:
        run(registry, "mutator", {})
    assert caught.value.signatures_required == 1
    assert not (folder / "ran.marker").exists()
    assert run(registry, "mutator", {}, confirm=True).status is Status.SUCCEEDED
    assert (folder / "ran.marker").exists()


def test_a_read_only_persona_denies_mutating_even_when_confirmed(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    folder = make_skill("mutator", TOUCH, **{"class": "mutating"})
    registry = registry_of(skills_root, tmp_path)
    for persona in ("watcher", "default"):
        with pytest.raises(Denied):
            run(registry, "mutator", {}, confirm=True, persona=persona)
    assert not (folder / "ran.marker").exists()
    assert run(registry, "mutator", {}, confirm=True, persona="fixer").ok


def test_a_persona_blacklist_denies_the_tool_whatever_its_class(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    make_skill("disk_delete", TOUCH)
    with pytest.raises(Denied) as caught:
        run(registry_of(skills_root, tmp_path), "disk_delete", {}, persona="fixer")
    assert "disk_delete" in caught.value.message


def test_a_dangerous_skill_runs_locally_only_with_confirmation_and_the_override(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    folder = make_skill("wipe", TOUCH, **{"class": "dangerous"})
    registry = registry_of(skills_root, tmp_path)
    with pytest.raises(ApprovalRequired) as caught:
        run(registry, "wipe", {}, confirm=True)
    assert caught.value.signatures_required == 2
    with pytest.raises(ApprovalRequired):
        run(registry, "wipe", {}, allow_dangerous=True)
    assert not (folder / "ran.marker").exists()
    assert run(registry, "wipe", {}, confirm=True, allow_dangerous=True).ok


def test_a_denial_is_decided_before_the_args_are_checked(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    make_skill("mutator", TOUCH, schema=SCHEMA, **{"class": "mutating"})
    with pytest.raises(Denied):
        run(registry_of(skills_root, tmp_path), "mutator", {"bad": 1}, persona="watcher")


def test_on_event_sees_running_then_stderr_and_progress_then_the_final_status(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    script = (
        "#!/bin/sh\ncat >/dev/null\necho step one >&2\n"
        'echo \'{"progress": 1, "total": 2, "message": "half"}\' >&2\necho \'{"done": 1}\'\n'
    )
    make_skill("chatty", script)
    events: list[Event] = []
    execution = run(registry_of(skills_root, tmp_path), "chatty", {}, on_event=events.append)
    kinds = [
        (e.type, e.data.get("status") or e.data.get("line") or e.data.get("progress"))
        for e in events
    ]
    assert kinds == [
        ("status", "running"),
        ("stderr", "step one"),
        ("progress", 1),
        ("status", "succeeded"),
    ]
    assert execution.duration_ms is not None and execution.duration_ms > 0
    assert execution.started_at is not None and execution.finished_at is not None


def test_the_model_envelope_is_the_verbatim_result_or_the_error_object(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    make_skill("spaced", '#!/bin/sh\ncat >/dev/null\necho \'  {"b": 1,   "a": 2}  \'\n')
    make_skill("broken", "#!/bin/sh\ncat >/dev/null\necho oops >&2\nexit 3\n")
    registry = registry_of(skills_root, tmp_path)
    assert run(registry, "spaced", {}).envelope() == '{"b": 1,   "a": 2}'
    failure = json.loads(run(registry, "broken", {}).envelope())
    assert failure == {
        "error": {"code": "exit_status", "message": "exit status 3"},
        "exit_code": 3,
        "stderr_tail": "oops\n",
    }


def test_the_child_gets_only_the_allowed_environment_names(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONGRID_TEST_SECRET", "s3cr3t")
    monkeypatch.setenv("ONGRID_TEST_ALLOWED", "visible")
    script = (
        f"#!{sys.executable}\nimport json, os, sys\nsys.stdin.read()\n"
        "print(json.dumps(dict(os.environ)))\n"
    )
    make_skill("env_dump", script, env_allow=["PATH", "ONGRID_TEST_ALLOWED", "UNSET_VAR_X"])
    execution = run(registry_of(skills_root, tmp_path), "env_dump", {})
    assert execution.ok, execution.error
    env = execution.result
    env.pop("LC_CTYPE", None)  # CPython may coerce the C locale in the child itself
    assert set(env) == {"PATH", "ONGRID_TEST_ALLOWED"}
    assert env["ONGRID_TEST_ALLOWED"] == "visible"


# ---- which guard keeps a target-less skill away from the runner ------------------------------
def test_a_tool_whose_builtin_cannot_be_resolved_is_denied_before_the_runner_is_asked(
    tmp_path: Path,
) -> None:
    native = tmp_path / "native"
    write_skill_md(
        native,
        "gone",
        {
            "name": "cache_gone",
            "description": "A cache tool that cannot load.",
            "tools": [
                {"name": "cache_gone", "impl": "builtin:nope.nothing"},
                {"name": "cache_usage", "impl": "builtin:files.disk_usage"},
            ],
        },
    )
    registry, _lines = load([native])
    skill = registry.get("cache_gone")
    assert (skill.builtin, skill.target, skill.available) == (None, None, False)
    runner = FunctionRunner(lambda _spec, _args: {})

    with pytest.raises(Denied, match=r"unavailable: unknown impl builtin:nope\.nothing"):
        run(registry, "cache_gone", {}, runner=runner)
    assert runner.calls == []


def test_only_a_hand_built_skill_with_neither_callable_nor_target_reaches_the_assertion() -> None:
    registry = Registry({"bare": Skill(name="bare", description="no callable, no target")})
    runner = FunctionRunner(lambda _spec, _args: {})

    with pytest.raises(AssertionError, match="neither a built-in callable nor a target"):
        run(registry, "bare", {}, runner=runner)
    assert runner.calls == []


def test_a_pack_skill_allowed_path_finds_the_packs_bin_first(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    tool = root / "bin" / "pack-tool"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho from-the-pack\n")
    tool.chmod(0o755)
    script = '#!/bin/sh\ncat >/dev/null\nprintf \'{"said": "%s"}\' "$(pack-tool)"\n'
    write_skill(root, "uses_tool", script, env_allow=["PATH"])
    registry, _ = load(external=[root])
    skill = registry.get("uses_tool")
    skill.source = "pack:demo"  # as the registry marks the skills of an installed pack
    execution = asyncio.run(ongrid_skills.execute(registry, "uses_tool", {}))
    assert execution.result == {"said": "from-the-pack"}, execution.error
    skill.source = "external"  # not a pack's: its root's bin/ is not put on PATH
    other = asyncio.run(ongrid_skills.execute(registry, "uses_tool", {}))
    assert other.result != {"said": "from-the-pack"}
