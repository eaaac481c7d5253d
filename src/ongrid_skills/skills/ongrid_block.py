"""What a SKILL.md declares for ongrid beyond its tools: ``metadata.ongrid`` and
``metadata.requires``, every field kept.

The original's frontmatter carries, besides ``scope`` and ``activation`` (read by
:mod:`~ongrid_skills.skills.skill_md`):

- ``metadata.ongrid.edge_runtime`` and ``metadata.ongrid.edge_capabilities`` — what an edge
  host needs to run the skill: kept and shown (``extra``), not used by this manager;
- ``metadata.ongrid.min_ongrid_version`` — the oldest ongrid-skills the skill runs on: kept and
  shown, and when this build is older (PEP 440 comparison, ``packaging.version``) the skill is
  *unavailable* with that reason; a value that is not a version makes it unavailable too (it
  cannot be checked), with a warning;
- ``metadata.requires.credentials`` — the credential slots (SPEC §18): kept and shown as
  written, whatever kind of skill declares them.

Any other key of ``metadata.ongrid`` or ``metadata.requires`` is kept and shown as
``metadata.<block>.<key>``, with an ``unknown_key`` warning: nothing the author wrote is dropped.
Values written as one line of JSON text (``metadata.openclaw: "{\\"requires\\": …}"``, as in the
public openclaw collection) are read as the object they hold (:func:`json_valued`).

>>> json_valued('{"requires": {"env": ["X"]}}')
{'requires': {'env': ['X']}}
>>> version_problem("0.2", "0.1.0")
'needs ongrid-skills 0.2 or newer; this is 0.1.0'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import metadata as distribution
from typing import Any

from packaging.version import InvalidVersion, Version

from ongrid_skills.skills.notices import UNKNOWN_KEY, VERSION_UNCHECKED, Notice

#: The keys of ``metadata.ongrid`` that are read here or by skill_md.
ONGRID_READ = ("scope", "activation")
#: Kept and shown as ``metadata.ongrid.<key>`` (the original's fields).
ONGRID_KEPT = ("edge_runtime", "edge_capabilities", "min_ongrid_version")
#: The keys of ``metadata.requires`` read by the requirements check or the credential slots.
REQUIRES_READ = ("bins", "config")
MAX_JSON_DEPTH = 32


def running_version() -> str:
    """The version of the installed ongrid-skills distribution."""
    return distribution.version("ongrid-skills")


def json_valued(value: Any) -> Any:
    """``value`` itself, or the object or list a JSON text holds (``"{…}"``, ``"[…]"``)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "{[":
        return value
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return value
    return parsed if _depth(parsed) <= MAX_JSON_DEPTH else value


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def parse_json_children(metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with each child written as JSON text read as the object it holds."""
    return {key: json_valued(value) for key, value in metadata.items()}


def declared_fields(metadata: Mapping[str, Any], warnings: list[Notice]) -> dict[str, Any]:
    """The fields of ``metadata.ongrid`` and ``metadata.requires`` kept in ``extra``."""
    out: dict[str, Any] = {}
    for block, read, kept in (
        ("ongrid", ONGRID_READ, ONGRID_KEPT),
        ("requires", REQUIRES_READ, ("credentials",)),
    ):
        value = metadata.get(block)
        if not isinstance(value, dict):
            continue
        for key, item in value.items():
            if key in read:
                continue
            name = f"metadata.{block}.{key}"
            out[name] = item
            if key not in kept:
                warnings.append(
                    Notice(
                        UNKNOWN_KEY, "metadata", f"unknown key {name!r} is kept and shown, not used"
                    )
                )
    return out


def min_version(metadata: Mapping[str, Any]) -> Any:
    """``metadata.ongrid.min_ongrid_version`` as written (None when absent)."""
    block = metadata.get("ongrid")
    return block.get("min_ongrid_version") if isinstance(block, dict) else None


def version_problem(wanted: Any, current: str | None = None) -> str | None:
    """Why this build does not meet ``min_ongrid_version`` ``wanted``; None when it does or
    when nothing is wanted."""
    if wanted is None:
        return None
    here = current or running_version()
    try:
        if Version(here) >= Version(str(wanted)):
            return None
    except InvalidVersion:
        return f"min_ongrid_version {wanted!r} is not a version: cannot be checked"
    return f"needs ongrid-skills {wanted} or newer; this is {here}"


def version_notice(wanted: Any) -> Notice | None:
    """A warning for a ``min_ongrid_version`` that is not a version, else None."""
    if wanted is None:
        return None
    try:
        Version(str(wanted))
    except InvalidVersion:
        return Notice(
            VERSION_UNCHECKED,
            "metadata",
            f"metadata.ongrid.min_ongrid_version {wanted!r} is not a version: the skill is "
            "unavailable until it is one",
        )
    return None
