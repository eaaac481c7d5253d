"""What one call is given besides its args: credential env entries, the private directory of its
credential files, and the masker of every value it was given (SPEC §18).

Built above the execution layer (``ongrid_skills.credentials``) and handed to
:func:`~ongrid_skills.execution.pipeline.run_skill`, which adds it to the child's environment
(``$CREDENTIALS_DIRECTORY`` for the directory) and to the runner's :class:`SpawnSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ongrid_skills.execution.masking import Masker
from ongrid_skills.skills.model import Skill

#: systemd's name for the folder of a unit's credentials, which skills may already read.
DIRECTORY_VARIABLE = "CREDENTIALS_DIRECTORY"


@dataclass(frozen=True, slots=True)
class Grant:
    env: Mapping[str, str] = field(default_factory=dict)
    directory: str | None = None
    masker: Masker | None = None

    def environment(self) -> dict[str, str]:
        """The entries the child's environment gets from this grant."""
        out = dict(self.env)
        if self.directory is not None:
            out[DIRECTORY_VARIABLE] = self.directory
        return out


class Grants(Protocol):
    """Where the grants of calls come from (``ongrid_skills.credentials.service.Credentials``)."""

    async def grant(self, skill: Skill, call_id: str) -> tuple[Grant, dict[str, str]] | None:
        """The grant of one call of ``skill`` and its slot → credential names; None for a
        skill without slots. Raises CredentialMissing and CredentialUnreadable."""
        ...

    def names(self, skill: Skill) -> dict[str, str | None]:
        """Each slot of ``skill`` → the credential bound to it now (names only)."""
        ...

    def missing(self, skill: Skill) -> str | None:
        """``needs credential for slot <slot>`` when a slot of ``skill`` is unbound."""
        ...

    def release(self, grant: Grant | None) -> None:
        """Remove what the grant put on disk, once the call ended."""
        ...


__all__ = ["DIRECTORY_VARIABLE", "Grant", "Grants"]
