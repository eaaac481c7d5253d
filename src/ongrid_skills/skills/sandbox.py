"""A skill's sandbox declaration (SPEC §20): a profile, extra paths, network; and how it
combines with the operator's default for the skill's class.

``{"profile": "strict" | "host-read" | "none", "read": [...], "write": [...], "network": false}``
in ``skill.json`` (field ``sandbox``) and on a SKILL.md ``exec:`` tool. Validated strictly:
unknown keys, relative or non-normalised paths, a non-boolean ``network`` are build errors.
Enforcement is :mod:`ongrid_skills.execution.confine`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

STRICT = "strict"
HOST_READ = "host-read"
NONE = "none"
#: Strictest first.
PROFILES = (STRICT, HOST_READ, NONE)
_RANK = {name: rank for rank, name in enumerate(PROFILES)}
_KEYS = ("profile", "read", "write", "network")
MAX_PATHS = 64


class SandboxProblem(ValueError):
    """Why a declaration is not valid (the loader turns it into a ManifestError)."""


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """One declaration (or an operator default: a profile alone)."""

    profile: str = NONE
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    network: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "read": list(self.read),
            "write": list(self.write),
            "network": self.network,
        }


def stricter(a: str, b: str) -> str:
    """The stricter of two profiles."""
    return a if _RANK[a] <= _RANK[b] else b


def parse_profile(value: object) -> str | None:
    """A profile name, or None when ``value`` is none of them."""
    return value if isinstance(value, str) and value in _RANK else None


def parse_sandbox(value: object) -> SandboxSpec | None:
    """The declaration in ``value`` (None when absent); raises SandboxProblem."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SandboxProblem("must be an object with profile, read, write, network")
    unknown = sorted(set(value) - set(_KEYS))
    if unknown:
        raise SandboxProblem(f"unknown key {unknown[0]!r} (known: {', '.join(_KEYS)})")
    if "profile" not in value:
        raise SandboxProblem("profile is required: strict, host-read or none")
    profile = parse_profile(value["profile"])
    if profile is None:
        raise SandboxProblem(f"profile must be strict, host-read or none, got {value['profile']!r}")
    network = value.get("network", False)
    if not isinstance(network, bool):
        raise SandboxProblem(f"network must be true or false, got {network!r}")
    read = _paths(value.get("read", []), "read")
    write = _paths(value.get("write", []), "write")
    if profile == NONE and (read or write or network):
        raise SandboxProblem("profile none confines nothing: read, write and network mean nothing")
    return SandboxSpec(profile, read, write, network)


def _paths(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise SandboxProblem(f"{key} must be a list of absolute paths")
    if len(value) > MAX_PATHS:
        raise SandboxProblem(f"{key} holds more than {MAX_PATHS} paths")
    for path in value:
        if not path.startswith("/") or "\0" in path:
            raise SandboxProblem(f"{key}: {path!r} is not an absolute path")
        if os.path.normpath(path) != path or path.startswith("//"):
            fixed = os.path.normpath(path)
            raise SandboxProblem(f"{key}: {path!r} is not normalised (write {fixed!r})")
    return tuple(dict.fromkeys(value))


def effective(
    declared: SandboxSpec | None, default_profile: str, *, may_loosen: bool = False
) -> SandboxSpec:
    """The profile a call runs under: the skill's declaration tightened to the operator's
    default for its class. A declared profile looser than the default is raised to the
    default (unless the operator lets skills loosen it); the declared paths and ``network``
    are the skill's in every case (they are what it needs, shown and hashed)."""
    if declared is None:
        return SandboxSpec(default_profile)
    profile = declared.profile if may_loosen else stricter(declared.profile, default_profile)
    if profile == declared.profile:
        return declared
    return SandboxSpec(profile, declared.read, declared.write, declared.network)


__all__ = [
    "HOST_READ",
    "NONE",
    "PROFILES",
    "STRICT",
    "SandboxProblem",
    "SandboxSpec",
    "effective",
    "parse_profile",
    "parse_sandbox",
    "stricter",
]
