"""What one load found: its log lines, refused files, warnings and what it skipped (SPEC §3).

``GET /v1/loader`` serves it; ``Registry.report`` holds the one of a registry's load.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ongrid_skills.errors import ManifestError


@dataclass(frozen=True, slots=True)
class Skipped:
    """One file or folder a load skipped, and why (``GET /v1/loader`` lists them).

    ``what`` is ``skill.json``, ``SKILL.md``, ``persona`` or ``dir``; ``kind`` is ``parse`` or
    ``build`` (a refused file: ``error`` holds it), ``duplicate`` (a name already taken: not an
    error) or ``dir``; ``log_line`` is the loader line that reported it; ``code`` is why, as
    one of the stable words of ``discovery.LOAD_CODES``."""

    what: str
    kind: str
    path: str
    reason: str
    log_line: str
    name: str | None = None
    error: ManifestError | None = None
    code: str = "invalid_manifest"

    def to_dict(self) -> dict[str, object]:
        err = self.error
        return {
            "what": self.what,
            "kind": self.kind,
            "code": self.code,
            "path": self.path,
            "name": self.name,
            "reason": self.reason,
            "line": err.line if err is not None else None,
            "column": err.column if err is not None else None,
            "field": err.field if err is not None else None,
            "log_line": self.log_line,
        }


@dataclass(frozen=True, slots=True)
class LoaderWarning:
    """One warning of a load (``GET /v1/loader`` lists them): its stable ``code``
    (:mod:`~ongrid_skills.skills.notices`), the file, the message and the loader line. The file
    loaded (or was knowingly left out): a warning is never an error."""

    code: str
    path: str
    message: str
    log_line: str
    name: str | None = None
    key: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "path": self.path,
            "name": self.name,
            "key": self.key,
            "message": self.message,
            "log_line": self.log_line,
        }


@dataclass(slots=True)
class LoadReport:
    """What a load found: log lines (without the prefix), errors, warnings, what it skipped,
    counts."""

    lines: list[str] = field(default_factory=list)
    errors: list[ManifestError] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    warnings: list[LoaderWarning] = field(default_factory=list)
    registered: int = 0
    duplicates: int = 0
    skipped_dirs: int = 0

    def failure(self, name: str, what: tuple[str, ...] = ("skill.json", "SKILL.md")) -> str | None:
        """Why a file that would have given ``name`` was refused, if one was: a file whose
        declared name is ``name``, else one in a folder named after it (a file that could not
        be parsed has no name). None when no refused file matches."""
        by_folder = None
        for item in self.skipped:
            if item.error is None or item.what not in what:
                continue
            if item.name == name:
                return f"{item.reason} (in {item.path})"
            stem = os.path.basename(os.path.dirname(item.path))
            if item.what == "persona":
                stem = os.path.splitext(os.path.basename(item.path))[0]
            if by_folder is None and stem.lower().replace("-", "_") == name:
                by_folder = f"{item.reason} (in {item.path})"
        return by_folder


__all__ = ["LoadReport", "LoaderWarning", "Skipped"]
