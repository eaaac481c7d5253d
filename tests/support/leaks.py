"""Searching a folder's files for a secret, the way the tests of credentials prove it is nowhere:
every regular file under a root, read whole as bytes (a database, its WAL, logs, keys…). A file
that vanishes while the walk goes (a WAL checkpointed away, a temporary file renamed) is skipped:
what is gone holds nothing."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, *needles: str | bytes) -> list[str]:
    """The files under ``root`` that hold any of ``needles``."""
    wanted = [n.encode() if isinstance(n, str) else n for n in needles]
    found = []
    for path in sorted(root.rglob("*")):
        try:
            if not path.is_file():
                continue
            data = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if any(needle in data for needle in wanted):
            found.append(str(path))
    return found


__all__ = ["files_holding"]
