"""The small shared vocabulary every layer speaks: skill classes, persona modes, roles, limits.

Plain enums and constants, importable from anywhere. A base module: it must never import
anything of ours, and holds no behaviour beyond parsing a value.
"""

from __future__ import annotations

import enum

#: A call's wall-clock limit when its skill sets none, and the largest a skill may set (SPEC §2).
DEFAULT_TIMEOUT_SECONDS = 30
MAX_TIMEOUT_SECONDS = 86400


class SkillClass(enum.StrEnum):
    """How much harm a skill can do: it sets the signatures a call needs (0, 1 or 2)."""

    SAFE = "safe"
    MUTATING = "mutating"
    DANGEROUS = "dangerous"

    @classmethod
    def parse(cls, value: str) -> SkillClass:
        """Accept the class names and the SKILL.md aliases read/write/destructive."""
        return cls(_CLASS_ALIASES.get(value, value))


_CLASS_ALIASES = {"read": "safe", "write": "mutating", "destructive": "dangerous"}


class PermissionMode(enum.StrEnum):
    """A persona's ceiling: which skill classes it may run at all (``policy.MODE_ALLOWS``)."""

    READ_ONLY = "read-only"
    MUTATING_WITH_CONFIRM = "mutating-with-confirm"
    DUAL_SIGN = "dual-sign-required"


class Role(enum.StrEnum):
    """A principal's role, ordered viewer < operator < admin (what it may run and sign)."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
