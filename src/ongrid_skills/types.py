"""The small shared vocabulary every layer speaks: skill classes, persona modes, roles, limits.

Plain enums and constants, importable from anywhere (a base module: it imports nothing of ours).
"""

from __future__ import annotations

import enum

#: A call's wall-clock limit when its skill sets none, and the largest a skill may set (SPEC §2).
DEFAULT_TIMEOUT_SECONDS = 30
MAX_TIMEOUT_SECONDS = 86400


class SkillClass(enum.StrEnum):
    SAFE = "safe"
    MUTATING = "mutating"
    DANGEROUS = "dangerous"

    @classmethod
    def parse(cls, value: str) -> SkillClass:
        """Accept the class names and the SKILL.md aliases read/write/destructive."""
        return cls(_CLASS_ALIASES.get(value, value))


_CLASS_ALIASES = {"read": "safe", "write": "mutating", "destructive": "dangerous"}


class PermissionMode(enum.StrEnum):
    READ_ONLY = "read-only"
    MUTATING_WITH_CONFIRM = "mutating-with-confirm"
    DUAL_SIGN = "dual-sign-required"


class Role(enum.StrEnum):
    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
