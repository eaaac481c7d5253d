"""Installed packs as roots of the loader: which pack folders are active in a data dir.

Packs are installed (by :mod:`ongrid_skills.packs.install`) under ``$ONGRID_DATA_DIR/packs``::

    packs/<id>/<version>/     the files of one installed version (read-only)
    packs/.active/<id>        a symbolic link to ../<id>/<version>: the active version

The link is the one switch of an install, upgrade, rollback or removal (replaced or removed in
one ``rename``/``unlink``), so a reader sees either the previous state or the next, never a mix.
This module only reads those links, cheaply (no store, no packs library): every registry build
calls it. It must never write anything, nor accept a link that leads out of ``packs/<id>/``.
"""

from __future__ import annotations

import os
import re

PACKS_DIR = "packs"
ACTIVE_DIR = ".active"
#: What a pack id may be (pack.json's rule): the name of its folder and of its link.
PACK_ID_RE = re.compile(r"[a-z0-9_-][a-z0-9_.-]{0,63}")


def packs_dir(data_dir: str) -> str:
    """``$ONGRID_DATA_DIR/packs``, absolute."""
    return os.path.join(os.path.abspath(data_dir), PACKS_DIR)


def active_versions(data_dir: str) -> dict[str, str]:
    """``{pack id: active version}`` from the links of ``packs/.active``, sorted by id.

    A link that is not ``../<id>/<version>`` for its own id, or whose folder is missing, is
    ignored (it is not something an install wrote).
    """
    active = os.path.join(packs_dir(data_dir), ACTIVE_DIR)
    try:
        names = sorted(os.listdir(active))
    except OSError:
        return {}
    found: dict[str, str] = {}
    for name in names:
        if not PACK_ID_RE.fullmatch(name):
            continue  # a temporary link of a switch in progress (they start with a dot)
        try:
            target = os.readlink(os.path.join(active, name))
        except OSError:
            continue
        parts = target.split("/")
        if len(parts) != 3 or parts[0] != ".." or parts[1] != name or parts[2] in ("", ".", ".."):
            continue
        if os.path.isdir(os.path.join(packs_dir(data_dir), name, parts[2])):
            found[name] = parts[2]
    return found


def active_pack_roots(data_dir: str) -> tuple[str, ...]:
    """The folders of the active versions (``packs/<id>/<version>``), in id order: each is a
    skill root (``skill.json`` and ``SKILL.md`` files) whose ``agents/`` holds personas."""
    base = packs_dir(data_dir)
    return tuple(
        os.path.join(base, pack_id, version)
        for pack_id, version in active_versions(data_dir).items()
    )
