"""The ``tools`` of a SKILL.md: each entry → one Skill (SPEC §6), and what this build lacks.

- ``impl: builtin:<module>.<function>`` runs in-process; ``impl: exec:<relative path>`` runs
  under the wire protocol of SPEC §4, its canonical path under the SKILL.md's own folder;
- :func:`missing_impls` — when no tool's impl exists in this build (an impl kind other than
  ``builtin``/``exec``, a builtin that does not resolve), the SKILL.md loads as instructions
  with those tools listed unavailable (:mod:`~ongrid_skills.skills.skill_md`);
- ``confirmation``: ``required``, ``not-required``, ``self-managed`` (:data:`CONFIRMATION_MODES`).
"""

from __future__ import annotations

import os
from typing import Any

from ongrid_skills.paths import ENV_NAME_RE, check_entry
from ongrid_skills.skills.credential_slots import SlotError, parse_slots
from ongrid_skills.skills.impls import resolve
from ongrid_skills.skills.model import Skill, SpawnTarget, scope_problem
from ongrid_skills.skills.notices import CONFIRMATION_UNKNOWN, TOOL_KEY_IGNORED, Notice
from ongrid_skills.skills.preview_spec import PreviewProblem, parse_preview
from ongrid_skills.skills.sandbox import SandboxProblem, parse_sandbox
from ongrid_skills.skills.schemas import schema_problem, signature_schema
from ongrid_skills.skills.skill_json import NAME_RE
from ongrid_skills.types import MAX_TIMEOUT_SECONDS, SkillClass

#: ``confirmation`` of a tool: ``required`` and ``self-managed`` ask one confirmation even
#: for a safe tool; ``not-required`` asks what the class asks, never less (docs/skills.md).
CONFIRMATION_MODES = ("required", "not-required", "self-managed")
TOOL_KEYS = (
    "name",
    "impl",
    "class",
    "description",
    "when_to_use",
    "confirmation",
    "timeout_seconds",
    "schema",
    "sandbox",
    "env_allow",
    "preview",
)


def missing_impls(tools: Any) -> list[tuple[str, str, str]]:
    """(tool, impl, why) of every tool when none of them has an impl this build provides (an
    impl kind other than builtin/exec, or a builtin that does not resolve); else ``[]`` (and
    ``[]`` when an entry is malformed: building the tools reports it)."""
    if not isinstance(tools, list) or not tools:
        return []
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            return []
        tname, impl = tool.get("name"), tool.get("impl")
        if not isinstance(tname, str) or not NAME_RE.fullmatch(tname) or len(tname) > 64:
            return []
        if not isinstance(impl, str) or ":" not in impl:
            return []
        kind, _, target = impl.partition(":")
        if kind == "exec":
            return []
        if kind == "builtin":
            fn, reason = resolve(target)
            if fn is not None:
                return []
            out.append((tname, impl, reason or f"unknown impl {impl}"))
        else:
            out.append((tname, impl, f"impl kind {kind!r} does not exist in this build"))
    return out


def _confirmation(
    tool: dict[str, Any], where: str, warnings: list[Notice]
) -> tuple[str | None, bool]:
    """(the declared mode, whether the gate asks one confirmation even when safe).

    ``required`` and ``self-managed`` ask it (a tool's own confirmation cannot reach a human
    here: stdin holds the args and is closed, there is no terminal); ``not-required`` asks
    nothing beyond the class. Any other value: ``required`` applies, with a warning."""
    value = tool.get("confirmation")
    if value is None:
        return None, False
    if value in CONFIRMATION_MODES:
        return str(value), value != "not-required"
    warnings.append(
        Notice(
            CONFIRMATION_UNKNOWN,
            "tools",
            f"{where}.confirmation {value!r} is not required, not-required or self-managed: "
            "required applies",
        )
    )
    return "required", True


def build_tool(
    tool: Any,
    index: int,
    description: str,
    problem: str | None,
    folder: str,
    root: str,
    shown_root: str,
    default_timeout: int,
    fail: Any,
    common: dict[str, Any],
    doc_name: str,
    warnings: list[Notice],
    declared_slots: Any = None,
) -> Skill:
    where = f"tools[{index}]"
    if not isinstance(tool, dict):
        raise fail(f"{where} must be a mapping", "tools", doc_name)
    tname = tool.get("name")
    if not isinstance(tname, str) or not NAME_RE.fullmatch(tname) or len(tname) > 64:
        raise fail(f"{where}.name {tname!r} must match [a-z0-9_]+ (≤ 64)", "tools", doc_name)
    for key in tool:
        if key not in TOOL_KEYS:
            warnings.append(
                Notice(TOOL_KEY_IGNORED, "tools", f"{where}: unknown key {key!r} is ignored")
            )
    try:
        skill_class = SkillClass.parse(str(tool.get("class", "safe")))
    except ValueError:
        raise fail(f"{where}.class {tool.get('class')!r} is not a class", "tools", tname) from None
    timeout = tool.get("timeout_seconds", 0) or 0
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int)
        or not (0 <= timeout <= MAX_TIMEOUT_SECONDS)
    ):
        raise fail(f"{where}.timeout_seconds must be an integer 0..86400", "tools", tname)
    impl = tool.get("impl")
    if not isinstance(impl, str) or ":" not in impl:
        raise fail(
            f"{where}.impl must be builtin:<module>.<function> or exec:<path>", "tools", tname
        )
    kind, _, target_name = impl.partition(":")
    confirmation, confirm = _confirmation(tool, where, warnings)
    tdesc = tool.get("description")
    skill = Skill(
        name=tname,
        description=tdesc.strip() if isinstance(tdesc, str) and tdesc.strip() else description,
        skill_class=skill_class,
        category="native",
        kind="native",
        timeout_seconds=timeout or default_timeout,
        confirmation=confirmation,
        confirmation_required=confirm,
        available=problem is None,
        unavailable_reason=problem,
        **{**common, "when_to_use": tool.get("when_to_use") or common["when_to_use"]},
    )
    declared = tool.get("schema")
    if declared is not None:
        issue = schema_problem(declared)
        if issue is not None:
            raise fail(f"{where}: {issue}", "tools", tname)
        skill.schema = declared
    if "preview" in tool and kind != "exec":
        raise fail(f"{where}.preview needs an exec: tool", "tools", tname)
    if kind == "builtin":
        if tool.get("sandbox") is not None:
            raise fail(
                f"{where}.sandbox needs an exec: tool; a builtin: runs in the manager's process, "
                "which no profile confines",
                "tools",
                tname,
            )
        if declared_slots:
            raise fail(
                f"{where}: metadata.requires.credentials needs an exec: tool; a builtin: runs "
                "in the manager's process, where no credential is injected",
                "tools",
                tname,
            )
        fn, reason = resolve(target_name)
        if fn is None:
            skill.available, skill.unavailable_reason = False, reason
        else:
            skill.builtin = fn
            if declared is None:
                skill.schema = signature_schema(fn)
    elif kind == "exec":
        skill.kind = "subprocess"
        env_allow = tool.get("env_allow") or []
        if not isinstance(env_allow, list) or not all(
            isinstance(e, str) and ENV_NAME_RE.fullmatch(e) for e in env_allow
        ):
            raise fail(f"{where}.env_allow must be a list of variable names", "tools", tname)
        joined = os.path.normpath(os.path.join(folder, target_name))
        # The allow-list root holds other skills and packs too: an exec: entry is this skill's
        # own script, so its canonical path must lie under this SKILL.md's (canonical) folder,
        # here and again before every spawn (SpawnTarget.confine).
        check = check_entry(joined, root, shown_root, folder)
        if check.problem is not None:
            raise fail(check.problem, "tools", tname)
        skill.target = SpawnTarget(
            entry=check.path,
            root=root,
            folder=folder,
            env_allow=tuple(env_allow),
            shown_root=shown_root,
            fingerprint=check.fingerprint,
            confine=folder,
        )
        try:
            skill.credentials = parse_slots(declared_slots, tuple(env_allow))
        except SlotError as exc:
            raise fail(f"metadata.requires.credentials: {exc}", "metadata", tname) from None
        try:
            skill.sandbox = parse_sandbox(tool.get("sandbox"))
        except SandboxProblem as exc:
            raise fail(f"{where}.sandbox: {exc}", "tools", tname) from None
        try:
            skill.preview = parse_preview(
                tool.get("preview"), main=skill.target, skill_timeout=skill.timeout_seconds
            )
        except PreviewProblem as exc:
            raise fail(f"{where}.{exc}", "tools", tname) from None
    else:
        raise fail(f"{where}.impl kind {kind!r} is not builtin or exec", "tools", tname)
    issue = scope_problem(skill.scope, skill.schema, skill.kind)
    if issue is not None:
        raise fail(f"{where}: {issue}", "tools", tname)
    return skill
