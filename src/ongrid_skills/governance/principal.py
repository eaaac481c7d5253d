"""Who is calling: a principal holds a role and is a human or an agent.

Identity only: what a principal may do is decided in :mod:`ongrid_skills.governance.gate`.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass

from ongrid_skills.types import Role


@dataclass(frozen=True, slots=True)
class Principal:
    """``name`` identifies the principal in approvals and the audit log (token names are unique)."""

    name: str
    role: Role
    human: bool = True

    @property
    def can_sign(self) -> bool:
        """Whether it may sign approvals at all: a human operator or admin, never an agent."""
        return self.human and self.role in (Role.OPERATOR, Role.ADMIN)


def local_user() -> str:
    """The login name of whoever runs this process (the uid when it has no name)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
