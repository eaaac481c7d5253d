"""ongrid-skills: a skill manager for LLM agents doing operations work.

Load skills from allow-listed folders, gate every call by class and persona, run each call as a
subprocess speaking JSON, and stream its stderr into a live timeline::

    import asyncio, ongrid_skills

    registry = ongrid_skills.load_registry(external_dirs=["/etc/ongrid/skills"])
    execution = asyncio.run(ongrid_skills.execute(registry, "disk_cleaner", {"path": "/tmp"},
                                                  confirm=True, on_event=print))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ongrid_skills.errors import (
    ApprovalRequired,
    ConfigError,
    Denied,
    InvalidArgs,
    ManifestError,
    NotFound,
    SkillError,
    UnknownPersona,
    UnknownSkill,
)
from ongrid_skills.execution.pipeline import execute
from ongrid_skills.execution.records import Event, Execution, Status
from ongrid_skills.settings import Settings
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import PermissionMode, Role, SkillClass

if TYPE_CHECKING:
    # Imported on first use (see __getattr__): the runtime brings the store (SQLAlchemy,
    # Alembic), which commands such as ``--version``, ``list`` or ``run`` never need.
    from ongrid_skills.runtime import load_registry

__all__ = [
    "ApprovalRequired",
    "ConfigError",
    "Denied",
    "Event",
    "Execution",
    "InvalidArgs",
    "ManifestError",
    "NotFound",
    "PermissionMode",
    "Persona",
    "Registry",
    "Role",
    "Settings",
    "Skill",
    "SkillClass",
    "SkillError",
    "Status",
    "UnknownPersona",
    "UnknownSkill",
    "__version__",
    "execute",
    "load_registry",
]


def __getattr__(name: str) -> Any:
    if name == "load_registry":
        from ongrid_skills.runtime import load_registry  # noqa: PLC0415

        return load_registry
    if name == "__version__":
        from importlib.metadata import version  # noqa: PLC0415

        return version("ongrid-skills")
    raise AttributeError(name)
