"""Whether a SKILL.md skill can run on this host, and if not, the reason shown with it.

Two vocabularies, both honoured:

- ours: ``metadata.os`` and ``metadata.requires.{bins, config}`` — strict (a malformed value
  fails the skill's build, as it always did);
- openclaw's: ``metadata.openclaw`` (older names, read when it is absent: ``clawdbot``,
  ``clawdis``, ``moltbot``) with ``os``, ``always`` and ``requires.{bins, anyBins, env,
  config}`` — tolerant, as openclaw is: a malformed field is ignored with a warning. ``os`` takes
  openclaw's names (``darwin``, ``linux``, ``win32``); ``always: true`` skips the ``requires``
  checks (not ``os``); ``env`` names must be set and non-empty in the server's environment;
  ``config`` keys must be set to a true value (ONGRID_<KEY> or ``[config]``).

The other openclaw fields (``primaryEnv``, ``emoji``, ``homepage``, ``install``…) are kept in the
skill's ``extra`` for people and models to read. This module never runs anything: an ``install``
spec is shown, never executed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.notices import OPENCLAW_FIELD_IGNORED, Notice

#: The keys an openclaw block may live under in ``metadata``, newest first.
OPENCLAW_KEYS = ("openclaw", "clawdbot", "clawdis", "moltbot")
_OS_NAMES = {"linux": "linux", "darwin": "darwin", "win32": "windows"}
_OS_ALIASES = {"win32": "windows", "macos": "darwin", "osx": "darwin", "mac": "darwin"}
_FALSE = ("", "0", "false", "no", "off")

Fail = Callable[[str, str, str], ManifestError]
Warnings = list[Notice]


def host_os() -> str:
    return _OS_NAMES.get(sys.platform, sys.platform)


def metadata_mapping(value: Any) -> dict[str, Any] | None:
    """``metadata`` as a mapping: openclaw writes it as one line of JSON, which YAML may have
    left as text. None when it is neither."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def openclaw_block(metadata: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(key, block) of the first openclaw block present, or None."""
    for key in OPENCLAW_KEYS:
        block = metadata.get(key)
        if isinstance(block, dict):
            return key, block
    return None


def ongrid_unmet(
    metadata: Mapping[str, Any], config: Mapping[str, str], fail: Fail, name: str
) -> str | None:
    """Why our ``metadata.os``/``metadata.requires`` are not met here, or None."""
    systems = metadata.get("os")
    if systems is not None:
        if not isinstance(systems, list) or not all(isinstance(s, str) for s in systems):
            raise fail("metadata.os must be a list of names", "metadata", name)
        here = host_os()
        if systems and here not in [s.lower() for s in systems]:
            return f"runs on {', '.join(systems)}, not on {here}"
    requires = metadata.get("requires") or {}
    if not isinstance(requires, dict):
        raise fail("metadata.requires must be a mapping", "metadata", name)
    bins = requires.get("bins") or []
    keys = requires.get("config") or []
    for value, what in ((bins, "bins"), (keys, "config")):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(f"metadata.requires.{what} must be a list of strings", "metadata", name)
    missing_bins = [b for b in bins if shutil.which(b) is None]
    if missing_bins:
        return f"missing executables on PATH: {', '.join(missing_bins)}"
    missing_keys = [k for k in keys if k not in config]
    if missing_keys:
        return f"missing config: {', '.join(missing_keys)}"
    return None


def openclaw_unmet(
    key: str,
    block: Mapping[str, Any],
    config: Mapping[str, str],
    warnings: Warnings,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Why an openclaw block's requirements are not met here, or None; oddities → ``warnings``."""
    env = os.environ if environ is None else environ
    where = f"metadata.{key}"
    systems = _names(block.get("os"), f"{where}.os", warnings)
    if systems:
        here = host_os()
        if here not in [_OS_ALIASES.get(s.lower(), s.lower()) for s in systems]:
            return f"runs on {', '.join(systems)}, not on {here}"
    if block.get("always") is True:
        return None
    requires = block.get("requires")
    if requires is None:
        return None
    if not isinstance(requires, dict):
        warnings.append(
            Notice(
                OPENCLAW_FIELD_IGNORED, "metadata", f"{where}.requires is not a mapping; ignored"
            )
        )
        return None
    bins = _names(requires.get("bins"), f"{where}.requires.bins", warnings)
    missing = [b for b in bins if shutil.which(b) is None]
    if missing:
        return f"missing executables on PATH: {', '.join(missing)}"
    any_bins = _names(requires.get("anyBins"), f"{where}.requires.anyBins", warnings)
    if any_bins and all(shutil.which(b) is None for b in any_bins):
        return f"none of these executables on PATH: {', '.join(any_bins)}"
    names = _names(requires.get("env"), f"{where}.requires.env", warnings)
    unset = [n for n in names if not env.get(n)]
    if unset:
        return f"missing environment variables: {', '.join(unset)}"
    keys = _names(requires.get("config"), f"{where}.requires.config", warnings)
    off = [k for k in keys if k not in config or config[k].strip().lower() in _FALSE]
    if off:
        return f"missing config: {', '.join(off)}"
    return None


def _names(value: Any, where: str, warnings: Warnings) -> list[str]:
    """A list of names; one name written alone counts as a list of one; anything else is
    ignored with a warning."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v.strip()]
    warnings.append(
        Notice(OPENCLAW_FIELD_IGNORED, "metadata", f"{where} is not a list of names; ignored")
    )
    return []
