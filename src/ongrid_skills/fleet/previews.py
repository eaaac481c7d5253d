"""A request's preview on an edge worker (SPEC §20): what a call marked as a preview runs.

A manager sends the preview of a request for a host skill to the request's host as a signed
*safe* call (no signature) marked ``preview``. The worker runs the preview the skill declares in
its own registry — the one it announced, covered by its signed inventory and the definition
hash: its preview entry (confined to the skill's folder at load and again before the spawn), or
its entry with the preview's args merged over the call's (their keys win). Never the real call:
a skill that declares no preview refuses it (``no_preview``), whatever the call says.
"""

from __future__ import annotations

import dataclasses
import time

from ongrid_skills.execution.records import ErrorInfo, Execution, Status
from ongrid_skills.fleet.signing import Call
from ongrid_skills.skills.model import Skill
from ongrid_skills.types import SkillClass


def dry_run(skill: Skill, call: Call, execution: Execution, host: str) -> Skill | None:
    """The skill as its preview runs (a safe call of its preview entry, or of its entry with
    the preview's args merged over the call's: ``execution.args`` become those), or None
    (``execution`` failed) when it declares no preview or its preview entry changed."""
    spec = skill.preview
    if spec is None:
        fail(execution, "no_preview", f"{call.skill} on host {host} declares no preview: "
              "a call marked as its preview is not run")  # fmt: skip
        return None
    if spec.target is not None and spec.target.changed_on_disk():
        fail(execution, "skill_changed", f"{call.skill} on host {host}: its preview entry "
              "changed since it was loaded: not run")  # fmt: skip
        return None
    execution.args = spec.merged(call.args)
    return dataclasses.replace(
        skill,
        skill_class=SkillClass.SAFE,
        confirmation_required=False,
        target=spec.target or skill.target,
        timeout_seconds=spec.timeout_seconds,
        preview=None,
    )


def fail(execution: Execution, code: str, message: str) -> None:
    execution.status = Status.FAILED
    execution.error = ErrorInfo(code, message)
    execution.finished_at = time.time()
