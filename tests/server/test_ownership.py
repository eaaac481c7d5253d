"""One manager owns an embedded data dir: a second one beside it never disturbs its calls."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ongrid_skills.execution.records import Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.runtime import open_manager
from ongrid_skills.types import Role
from tests.server_support import make_settings
from tests.support import MakeSkill

WAITS = "#!/bin/sh\ncat >/dev/null\nwhile [ ! -e {gate} ]; do sleep 0.01; done\necho '{{}}'\n"


def test_a_second_manager_on_the_same_data_dir_leaves_running_calls_alone(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    make_skill("slow", WAITS.format(gate=gate), env_allow=["PATH"])
    settings = make_settings(tmp_path, skills_root)
    who = Principal("olga", Role.OPERATOR)

    async def scenario() -> tuple[bool, bool, Status, Status]:
        async with open_manager(settings, loader_sink=lambda _l: None) as first:
            execution = await first.submit("slow", {}, principal=who, wait=False)
            async with open_manager(settings, loader_sink=lambda _l: None) as second:
                seen_by_second = second.get(execution.id).status
                second_owns = second.owns_data_dir
            gate.touch()
            deadline = time.monotonic() + 20
            while first.get(execution.id).status is Status.RUNNING:
                assert time.monotonic() < deadline, "the call never finished"
                await asyncio.sleep(0.01)
            return first.owns_data_dir, second_owns, seen_by_second, first.get(execution.id).status

    first_owns, second_owns, seen, final = asyncio.run(scenario())
    assert (first_owns, second_owns) == (True, False)
    assert seen is Status.RUNNING  # not turned into "interrupted" by the second manager
    assert final is Status.SUCCEEDED


def test_the_data_dir_is_free_again_once_its_manager_closed(
    skills_root: Path, tmp_path: Path
) -> None:
    settings = make_settings(tmp_path, skills_root)

    async def twice() -> list[bool]:
        owned = []
        for _ in range(2):
            async with open_manager(settings, loader_sink=lambda _l: None) as manager:
                owned.append(manager.owns_data_dir)
        return owned

    assert asyncio.run(twice()) == [True, True]
