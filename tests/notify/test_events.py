"""The desk's listener port: every listener hears each committed change, and one that raises
fails neither the decision nor the listeners after it."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from ongrid_skills.execution.records import Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.notify.events import ApprovalEvent
from ongrid_skills.runtime import open_manager
from ongrid_skills.types import Role
from tests.support.server import make_settings
from tests.support.skills import MakeSkill


def test_a_listener_that_raises_fails_no_decision_and_the_next_listener_still_hears(
    make_skill: MakeSkill, skills_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_skill("set_flag", "#!/bin/sh\ncat\n", **{"class": "mutating"})
    settings = make_settings(tmp_path, skills_root)
    heard: list[ApprovalEvent] = []

    def broken(event: ApprovalEvent) -> None:
        raise RuntimeError("listener bug")

    async def scenario() -> Status:
        async with open_manager(settings, loader_sink=lambda _l: None) as manager:
            manager.desk.listeners.extend([broken, heard.append])
            pending = await manager.submit(
                "set_flag", {}, principal=Principal("olga", Role.OPERATOR)
            )
            approval = await manager.desk.approve(
                pending.approval_id or "", Principal("oscar", Role.OPERATOR), "ok"
            )
            return Status.SUCCEEDED if approval.status == "approved" else Status.FAILED

    assert asyncio.run(scenario()) is Status.SUCCEEDED
    assert [(e.kind, e.actor, e.note) for e in heard] == [
        ("requested", "olga", None),
        ("approved", "oscar", "ok"),
    ]
    assert [e.action for e in heard] == ["approval.requested", "approval.approved"]
    assert heard[1].approval.status == "approved"  # as it is after the commit
    assert [s.principal for s in heard[1].approval.signatures] == ["oscar"]
    failures = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in failures] == [
        "an approval listener failed on approval.requested",
        "an approval listener failed on approval.approved",
    ]
