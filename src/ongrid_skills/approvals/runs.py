"""The desk's one port to the manager (which is what keeps the two out of an import circle)."""

from __future__ import annotations

import asyncio
from typing import Protocol

from ongrid_skills.execution.records import Execution
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.registry import Registry


class Runs(Protocol):
    """What the desk needs of the manager: the current registry, reading an execution back,
    starting an approved call on the manager's one running path, and the credentials a skill's
    calls would be given now (slot -> credential name; names only)."""

    @property
    def registry(self) -> Registry: ...

    def get(self, execution_id: str) -> Execution: ...

    def start(self, execution: Execution, skill: Skill) -> asyncio.Task[None]: ...

    def credential_names(self, skill: Skill) -> dict[str, str | None]: ...
