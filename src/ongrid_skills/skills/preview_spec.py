"""A skill's preview (SPEC §20): how it runs itself without effect, read from its manifest.

``"preview": {"args": {"dry_run": true}}`` merges these args over the caller's; ``"preview":
{"entry": "plan.sh"}`` runs another executable of the skill's own folder with the caller's args
(same wire protocol). ``timeout_seconds`` (optional) bounds it: default
:data:`DEFAULT_PREVIEW_TIMEOUT` seconds, never above the skill's own timeout. Exactly one of
``args`` and ``entry``; any other key is refused, so that a typo never loses a preview silently.
Both ``skill.json`` and a SKILL.md ``exec:`` tool declare it in this shape; the loaders turn a
:class:`PreviewProblem` into a build error naming the field.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ongrid_skills.paths import check_entry
from ongrid_skills.skills.model import PreviewSpec, SpawnTarget
from ongrid_skills.skills.schemas import json_problem, json_type

#: A preview's timeout when its manifest does not say (capped by the skill's own timeout).
DEFAULT_PREVIEW_TIMEOUT = 10
PREVIEW_KEYS = ("args", "entry", "timeout_seconds")


class PreviewProblem(ValueError):
    """Why a declared preview cannot be loaded (the message names the key)."""


def parse_preview(raw: Any, *, main: SpawnTarget, skill_timeout: int) -> PreviewSpec | None:
    """The preview declared as ``raw`` for a skill whose entry is ``main``; None when absent.

    A ``preview.entry`` resolves against the skill's folder and, every symlink resolved, must
    stay inside that folder and the allow-list root: the same containment as the entry, checked
    again before each spawn (``SpawnTarget.confine``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise PreviewProblem(f"preview must be an object, got {json_type(raw)}")
    for key in raw:
        if key not in PREVIEW_KEYS:
            raise PreviewProblem(
                f"preview.{key} is not a preview field (args, entry, timeout_seconds)"
            )
    if ("args" in raw) == ("entry" in raw):
        raise PreviewProblem("preview needs exactly one of args and entry")
    timeout = raw.get("timeout_seconds", 0)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
        raise PreviewProblem(
            f"preview.timeout_seconds must be a positive integer, got {json.dumps(timeout)}"
        )
    if timeout > skill_timeout:
        raise PreviewProblem(
            f"preview.timeout_seconds {timeout} is above the skill's timeout_seconds "
            f"{skill_timeout}"
        )
    timeout = timeout or min(DEFAULT_PREVIEW_TIMEOUT, skill_timeout)
    if "args" in raw:
        args = raw["args"]
        if not isinstance(args, dict) or not args:
            raise PreviewProblem("preview.args must be a non-empty object")
        problem = json_problem(args)
        if problem is not None:
            raise PreviewProblem(f"preview.args: {problem}")
        return PreviewSpec(timeout_seconds=timeout, args=args)
    entry = raw["entry"]
    if not isinstance(entry, str) or not entry.strip() or "\x00" in entry:
        raise PreviewProblem("preview.entry must be a non-empty path")
    joined = os.path.normpath(entry if os.path.isabs(entry) else os.path.join(main.folder, entry))
    check = check_entry(joined, main.root, main.shown_root, main.folder)
    if check.problem is not None:
        raise PreviewProblem(f"preview.{check.problem}")
    target = SpawnTarget(
        entry=check.path,
        root=main.root,
        folder=main.folder,
        env_allow=main.env_allow,
        shown_root=main.shown_root,
        fingerprint=check.fingerprint,
        confine=main.folder,
    )
    return PreviewSpec(timeout_seconds=timeout, target=target)
