"""The names a SKILL.md skill answers to besides its tool name.

A name that is not snake_case is normalised for the tool name (``test-driven-development`` →
``test_driven_development``), but the name its author wrote stays addressable, and so does
``<pack>:<name>``, the cross-reference form of Claude Code plugins
(``superpowers:test-driven-development``). The registry resolves these aliases for
``read_skill``, ``read_skill_file``, ``show`` and MCP resources; a tool call uses the tool name,
never an alias, and an alias never shadows a skill's own name.

The pack of a skill, first found wins:

1. the ``name`` of ``.claude-plugin/plugin.json`` in the skill's folder or a folder above it, up
   to the allow-listed root (read like a skill.json: regular file, 1 MiB, JSON, nesting bounded);
2. the ``id`` of an ``openclaw.plugin.json``, then of a ``pack.json``, in the same places;
3. the root's own folder name — its parent's when the root is a ``skills`` folder — without an
   ``owner__`` prefix: ``…/obra__superpowers`` and ``…/obra__superpowers/skills`` are both
   ``superpowers``.

>>> aliases_of("tdd-guide", "tdd_guide", "superpowers")
('tdd-guide', 'superpowers:tdd-guide', 'superpowers:tdd_guide')
>>> folder_pack("/srv/collections/obra__superpowers/skills")
'superpowers'
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ongrid_skills.errors import ManifestError
from ongrid_skills.skills.skill_json import read_manifest

_PACK_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_MANIFESTS = (
    (os.path.join(".claude-plugin", "plugin.json"), "name"),
    ("openclaw.plugin.json", "id"),
    ("pack.json", "id"),
)


def aliases_of(declared: str, name: str, pack: str | None) -> tuple[str, ...]:
    """The written name (when it differs from the tool name) and the ``pack:`` forms."""
    out = [declared] if declared != name else []
    if pack:
        out.append(f"{pack}:{declared}")
        out.append(f"{pack}:{name}")
    return tuple(dict.fromkeys(out))


def folder_pack(root: str) -> str | None:
    """The pack name a root's folder gives (rule 3), or None when it gives none."""
    base = os.path.basename(os.path.normpath(root))
    if base == "skills":
        base = os.path.basename(os.path.dirname(os.path.normpath(root)))
    base = base.rsplit("__", 1)[-1]
    return base if _PACK_RE.fullmatch(base) else None


class PackNames:
    """The pack of each skill folder under one root, each folder's manifests read once."""

    def __init__(self, root: str, shown_root: str, log: Callable[[str], None]) -> None:
        """``root`` canonical; ``log`` gets one line per unusable pack manifest."""
        self.root = root
        self.shown_root = shown_root
        self.log = log
        self.default = folder_pack(shown_root)
        self._dirs: dict[str, str | None] = {}

    def pack_of(self, folder: str) -> str | None:
        """The pack of the skill in ``folder`` (canonical, under the root)."""
        current = folder
        chain = []
        while True:
            if current in self._dirs:
                found = self._dirs[current]
                break
            chain.append(current)
            found = self._declared(current)
            if found is not None or current == self.root or len(current) <= len(self.root):
                break
            current = os.path.dirname(current)
        for visited in chain:
            self._dirs.setdefault(visited, found)
        return found if found is not None else self.default

    def _declared(self, folder: str) -> str | None:
        for relative, key in _MANIFESTS:
            path = os.path.join(folder, relative)
            if not os.path.isfile(path):
                continue
            shown = self.shown_root + path[len(self.root) :]
            try:
                _, manifest = read_manifest(path)
            except ManifestError as err:
                self.log(f"pack manifest {shown}: {err.message}; its pack name is not used")
                continue
            value = manifest.get(key)
            if isinstance(value, str) and _PACK_RE.fullmatch(value):
                return value
            self.log(f"pack manifest {shown}: {key} {value!r} is not a pack name; not used")
        return None
