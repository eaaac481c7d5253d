"""The operator's side of sandbox profiles (SPEC §20): defaults per class, and the calls that are
refused (``sandbox_unavailable``) rather than run unconfined. Real children, a real runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.landlock import abi
from ongrid_skills.execution.records import Status
from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner
from ongrid_skills.skills.sandbox import SandboxSpec
from tests.support.processes import open_fds, open_fds_settled
from tests.support.runner import canonical_dir, require_helper, run_call, script_skill

pytestmark = pytest.mark.skipif(abi() < 4, reason="needs Landlock ABI 4 (files and TCP)")


def touching(tmp_path: Path) -> tuple[SpawnSpec, Path]:
    """A skill that writes a marker file outside its folder, and that marker."""
    marker = canonical_dir(tmp_path / "out") / "marker"
    spec = script_skill(
        canonical_dir(tmp_path / "skills"),
        f"#!/bin/sh\necho x > {marker} 2>/dev/null && echo 1 || echo 0\n",
    )
    return spec, marker


def test_the_operators_default_for_a_class_confines_skills_that_declare_nothing(
    tmp_path: Path,
) -> None:
    require_helper()
    spec, marker = touching(tmp_path)
    runner = SubprocessRunner(sandbox=SandboxPolicy(defaults={"mutating": "strict"}))
    assert run_call(runner, dataclasses.replace(spec, skill_class="safe")).outcome.result == 1
    marker.unlink()
    mutating = dataclasses.replace(spec, skill_class="mutating")
    assert run_call(runner, mutating).outcome.result == 0
    # Declaring none does not loosen it, unless the operator lets skills do so.
    declared = dataclasses.replace(mutating, sandbox=SandboxSpec("none"))
    assert run_call(runner, declared).outcome.result == 0
    loose = SubprocessRunner(
        sandbox=SandboxPolicy(defaults={"mutating": "strict"}, may_loosen=True)
    )
    assert run_call(loose, declared).outcome.result == 1


def test_a_confined_call_is_refused_not_run_without_the_spawn_helper(tmp_path: Path) -> None:
    spec, marker = touching(tmp_path)
    runner = SubprocessRunner(spawn="subprocess")
    outcome = run_call(runner, dataclasses.replace(spec, sandbox=SandboxSpec("strict"))).outcome
    assert outcome.status is Status.FAILED
    assert outcome.error is not None and outcome.error.code == "sandbox_unavailable"
    assert "needs the spawn helper" in outcome.error.message
    assert not marker.exists()
    plain = run_call(runner, spec).outcome  # profile none runs as it always did
    assert plain.result == 1


@pytest.mark.parametrize("where", ["data", "data/sub", "/proc/1", "/proc"])
def test_a_declared_path_over_a_protected_one_refuses_the_call(tmp_path: Path, where: str) -> None:
    require_helper()
    data = canonical_dir(tmp_path / "data")
    spec, marker = touching(tmp_path)
    path = where if where.startswith("/") else str(tmp_path / where)
    runner = SubprocessRunner(sandbox=SandboxPolicy(protected=(str(data),)))
    for declared in (SandboxSpec("strict", read=(path,)), SandboxSpec("host-read", write=(path,))):
        outcome = run_call(runner, dataclasses.replace(spec, sandbox=declared)).outcome
        assert outcome.error is not None and outcome.error.code == "sandbox_unavailable"
        assert path in outcome.error.message
    assert not marker.exists()


def test_a_confined_call_gets_an_empty_private_temp_dir(tmp_path: Path) -> None:
    require_helper()
    spec = script_skill(
        canonical_dir(tmp_path / "skills"),
        '#!/bin/sh\nls -A "$TMPDIR" | wc -l\n'
        'mkdir "$TMPDIR/d" && touch "$TMPDIR/d/left" "$TMPDIR/f"\n',
    )
    runner = SubprocessRunner(sandbox=SandboxPolicy())
    strict = dataclasses.replace(spec, sandbox=SandboxSpec("strict"))
    for _ in range(3):  # what a call left is gone before the next one starts
        outcome = run_call(runner, strict).outcome
        assert outcome.status is Status.SUCCEEDED, outcome.stderr_tail
        assert outcome.result == 0


def test_a_confined_call_reads_its_own_credentials_folder_and_no_other_calls(
    tmp_path: Path,
) -> None:
    require_helper()
    base = canonical_dir(tmp_path / "shm" / "ongrid-credentials")
    mine, theirs = canonical_dir(base / "call-1"), canonical_dir(base / "call-2")
    (mine / "token").write_text("mine")
    (theirs / "token").write_text("theirs")
    spec = script_skill(
        canonical_dir(tmp_path / "skills"),
        f'#!/bin/sh\nprintf \'["%s",\' "$(cat $CREDENTIALS_DIRECTORY/token)"\n'
        f"cat {theirs}/token >/dev/null 2>&1 && echo '1]' || echo '0]'\n",
        env={"CREDENTIALS_DIRECTORY": str(mine)},
    )
    runner = SubprocessRunner(sandbox=SandboxPolicy(protected=(str(base),)))
    unconfined = run_call(runner, dataclasses.replace(spec, credentials_dir=str(mine))).outcome
    assert unconfined.result == ["mine", 1]
    confined = dataclasses.replace(spec, credentials_dir=str(mine), sandbox=SandboxSpec("strict"))
    assert run_call(runner, confined).outcome.result == ["mine", 0]
    host = dataclasses.replace(confined, sandbox=SandboxSpec("host-read"))
    assert run_call(runner, host).outcome.result == ["mine", 0]


def test_a_closed_runner_keeps_no_descriptor_of_its_profiles_rules_and_opens_them_again(
    tmp_path: Path,
) -> None:
    # Every call of a profile shares descriptors of the system's folders (hundreds for
    # host-read): kept between calls, given back when the runner is closed.
    require_helper()
    spec = script_skill(canonical_dir(tmp_path / "skills"), "#!/bin/sh\necho 1\n")
    runner = SubprocessRunner(sandbox=SandboxPolicy())
    before = open_fds_settled()
    for _ in range(2):
        for profile in ("strict", "host-read"):
            confined = dataclasses.replace(spec, sandbox=SandboxSpec(profile))
            outcome = run_call(runner, confined).outcome
            assert outcome.status is Status.SUCCEEDED, outcome.stderr_tail
        assert open_fds() > before + 10  # the rules' descriptors, shared by the calls
        runner.close()
        assert open_fds() == before
