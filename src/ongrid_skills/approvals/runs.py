"""The desk's one port to the manager (which is what keeps the two out of an import circle)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from ongrid_skills.execution.records import Execution
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry


class Runs(Protocol):
    """What the desk needs of the manager: the current registry, reading an execution back,
    and starting an approved call on the manager's one running path."""

    @property
    def registry(self) -> Registry: ...

    def get(self, execution_id: str) -> Execution: ...

    def start(self, execution: Execution, skill: Skill) -> asyncio.Task[None]: ...
