"""What a runner is asked to run (:class:`SpawnSpec`), and the :class:`Runner` protocol.

Split from :mod:`ongrid_skills.execution.runner`, which re-exports both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from ongrid_skills.execution.masking import Masker
from ongrid_skills.execution.records import EventSink
from ongrid_skills.execution.verdict import RunOutcome
from ongrid_skills.skills.sandbox import SandboxSpec


@dataclass(frozen=True, slots=True)
class SpawnSpec:
    """What to spawn: a canonical entry under a canonical root, where, with which environment."""

    entry: str
    root: str
    cwd: str
    env: Mapping[str, str]
    timeout_seconds: float
    shown_root: str = ""
    confine: str | None = None  # a folder the entry must also stay in (a SKILL.md's exec:)
    masker: Masker | None = None  # the call's credential values, masked in all it writes
    # The skill's sandbox declaration and class (the runner's policy makes the profile), the
    # call's credentials folder and other folders it must read (a pack's bin/).
    sandbox: SandboxSpec | None = None
    skill_class: str = "safe"
    credentials_dir: str | None = None
    extra_read: tuple[str, ...] = ()


class Runner(Protocol):
    """Runs one admitted call of a skill with a target: all the pipeline and manager ask of it."""

    async def run(
        self, spec: SpawnSpec, payload: bytes, on_event: EventSink | None = None
    ) -> RunOutcome:
        """Run the call to its end: ``payload`` is the args JSON, ``on_event`` gets the
        timeline events. A skill's failure is the outcome, never an exception; cancelling the
        awaiting task stops the call and propagates."""
        ...


__all__ = ["Runner", "SpawnSpec"]
