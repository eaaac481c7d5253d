"""Who is calling: a principal holds a role and is a human or an agent."""

from __future__ import annotations

from dataclasses import dataclass

from .policy import Role


@dataclass(frozen=True, slots=True)
class Principal:
    """``name`` identifies the principal in approvals and the audit log (token names are unique)."""

    name: str
    role: Role
    human: bool = True

    @property
    def can_sign(self) -> bool:
        return self.human and self.role in (Role.OPERATOR, Role.ADMIN)


#: The human at a terminal on the manager's machine (CLI commands on the local data dir).
def local_operator(user: str) -> Principal:
    return Principal(f"cli:{user}", Role.ADMIN)
