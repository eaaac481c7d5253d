"""``SKILL.md``: YAML frontmatter + Markdown → native tools or one instructions skill (SPEC §6).

The format of Claude Code / Anthropic Agent Skills and openclaw, loaded unchanged:

- Required ``name`` and ``description``. A name that is not snake_case is normalised
  (lowercase, runs of other characters → ``_``, trimmed) with a warning: ``hello-world`` →
  ``hello_world``.
- ``tools: [...]``: each tool is a skill of its own (``impl: builtin:<module>.<function>`` runs
  in-process, ``impl: exec:<relative path>`` runs under the wire protocol of SPEC §4; its
  canonical path must lie under the SKILL.md's own folder, not only under the allow-list root).
- No ``tools``: an *instructions skill*; the model sees its name and description and reads the
  body on demand with ``read_skill``.
- ``metadata.os`` / ``metadata.requires.bins`` / ``metadata.requires.config`` not met, openclaw's
  ``metadata.openclaw`` requirements not met (:mod:`~ongrid_skills.skills.requirements`), or an
  impl that resolves to nothing: the skill is listed *unavailable* with the reason.
- Unknown keys (``allowed-tools``, ``license``, ``metadata.openclaw``…) are kept in ``extra``,
  size-capped (:mod:`~ongrid_skills.skills.declared`); a ``tools`` key in another format (plain
  strings, entries without ``impl``) is kept there too, with a warning.
- Frontmatter that is not YAML but flat ``key: value`` lines is read line by line, with a
  warning (:mod:`~ongrid_skills.skills.frontmatter`); the name as written and ``<pack>:<name>``
  stay addressable (:mod:`~ongrid_skills.skills.aliases`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.paths import ENV_NAME_RE, check_entry
from ongrid_skills.skills.aliases import aliases_of
from ongrid_skills.skills.credential_slots import SlotError, parse_slots
from ongrid_skills.skills.declared import cap_extra, cap_text
from ongrid_skills.skills.frontmatter import parse_frontmatter, read_text
from ongrid_skills.skills.impls import resolve
from ongrid_skills.skills.model import SCOPE_MANAGER, Skill, SpawnTarget, parse_scope, scope_problem
from ongrid_skills.skills.preview_spec import PreviewProblem, parse_preview
from ongrid_skills.skills.requirements import (
    OPENCLAW_KEYS,
    metadata_mapping,
    ongrid_unmet,
    openclaw_block,
    openclaw_unmet,
)
from ongrid_skills.skills.schemas import EMPTY_OBJECT_SCHEMA, schema_problem, signature_schema
from ongrid_skills.skills.skill_json import MAX_NAME_LENGTH, NAME_RE
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, SkillClass

KNOWN_KEYS = (
    "name",
    "description",
    "version",
    "when_to_use",
    "activation",
    "metadata",
    "tools",
)
TOOL_KEYS = (
    "name",
    "impl",
    "class",
    "description",
    "when_to_use",
    "confirmation",
    "timeout_seconds",
    "schema",
    "env_allow",
    "preview",
)
#: The ``metadata`` keys we read; any other one (openclaw's ``metadata.openclaw``…) is kept in
#: ``extra`` as ``metadata.<key>``.
KNOWN_METADATA_KEYS = ("os", "requires", "ongrid")


def normalise_name(raw: str) -> str:
    """``Hello-World v2`` → ``hello_world_v2``.

    >>> normalise_name("hello-world")
    'hello_world'
    """
    return re.sub(r"[^a-z0-9]+", "_", raw.lower()).strip("_")


@dataclass(slots=True)
class SkillDoc:
    """One parsed SKILL.md: its skills (tools or one instructions skill) and warnings."""

    name: str
    skills: list[Skill] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)  # (key, message)
    body: str = ""


def load_skill_md(
    path: str,
    *,
    shown: str,
    root: str,
    shown_root: str,
    config: Mapping[str, str],
    source: str = "native",
    default_timeout: int = DEFAULT_TIMEOUT_SECONDS,
    pack: str | None = None,
) -> SkillDoc:
    """Parse and build one SKILL.md (``path`` canonical, ``shown`` as logged; ``pack`` the name
    of its collection, for the ``pack:name`` aliases)."""
    text = read_text(path)
    parsed = parse_frontmatter(text, shown, tolerant=True)
    meta, body = parsed.meta, parsed.body
    raw_name = meta.get("name")

    def fail(message: str, key: str, name: str = "") -> ManifestError:
        return ManifestError(message, path=shown, kind="build", name=name, field=key)

    if not isinstance(raw_name, str) or not raw_name.strip():
        raise fail("name is required (a string)", "name")
    name = normalise_name(raw_name)
    doc = SkillDoc(name=name, body=body, warnings=parsed.warnings)
    if not name:
        raise fail(f"name {raw_name!r} has no letters or digits", "name", raw_name)
    if name != raw_name:
        doc.warnings.append(("name", f'name "{raw_name}" normalised to "{name}"'))
    if len(name) > MAX_NAME_LENGTH:
        raise fail(f"name is {len(name)} characters, at most {MAX_NAME_LENGTH}", "name", name)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise fail("description is required (a non-blank string)", "description", name)
    description = cap_text(description.strip(), "description", doc.warnings)
    when_to_use = _optional_text(meta, "when_to_use", fail, name)
    if when_to_use is not None:
        when_to_use = cap_text(when_to_use, "when_to_use", doc.warnings)
    metadata = metadata_mapping(meta.get("metadata"))
    if metadata is None:
        raise fail("metadata must be a mapping", "metadata", name)
    activation, keywords = _activation(meta, metadata, fail, name, doc)
    scope = _scope(metadata, fail, name)
    problem = ongrid_unmet(metadata, config, fail, name)
    requires = metadata.get("requires")
    declared_slots = requires.get("credentials") if isinstance(requires, dict) else None
    claw = openclaw_block(metadata)
    if problem is None and claw is not None:
        problem = openclaw_unmet(*claw, config, doc.warnings)
    tools = meta.get("tools")
    if tools is not None and tools != [] and not _our_tools(tools):
        doc.warnings.append(
            (
                "tools",
                "tools are not declarations of ours (each needs a name and an impl): "
                "kept and shown as metadata, loaded as an instructions skill",
            )
        )
        tools = None
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS}
    if tools is None and meta.get("tools"):
        extra["tools"] = meta["tools"]
    extra.update({f"metadata.{k}": v for k, v in metadata.items() if k not in KNOWN_METADATA_KEYS})
    for key in extra:
        if key != "tools" and key.removeprefix("metadata.") not in OPENCLAW_KEYS:
            doc.warnings.append((key, f"unknown key {key!r} is kept and shown, not used"))
    if extra or "version" in meta:
        extra = cap_extra({**extra, "version": meta.get("version")}, doc.warnings)
    folder = os.path.dirname(path)
    common: dict[str, Any] = {
        "when_to_use": when_to_use,
        "origin": shown,
        "source": source,
        "activation": activation,
        "keywords": keywords,
        "group": name,
        "extra": extra or None,
        # Canonical already: ``path`` is under the canonical root, reached without entering a
        # symlinked folder (or it is the resolved target of a symlinked SKILL.md).
        "base_dir": folder,
        "scope": scope,
    }
    if tools is None or tools == []:
        if declared_slots:
            raise fail(
                "metadata.requires.credentials needs a tool that runs (exec:): an instructions "
                "skill has no process to give a credential to",
                "metadata",
                name,
            )
        problem_scope = scope_problem(scope, EMPTY_OBJECT_SCHEMA, "instructions")
        if problem_scope is not None:
            raise fail(problem_scope, "metadata", name)
        doc.skills.append(
            Skill(
                name=name,
                description=description,
                kind="instructions",
                category="instructions",
                schema=dict(EMPTY_OBJECT_SCHEMA),
                available=problem is None,
                unavailable_reason=problem,
                timeout_seconds=default_timeout,
                declared_name=raw_name,
                aliases=aliases_of(raw_name, name, pack),
                **common,
            )
        )
        return doc
    if not isinstance(tools, list):
        raise fail("tools must be a list", "tools", name)
    for index, tool in enumerate(tools):
        doc.skills.append(
            _tool(
                tool,
                index,
                description,
                problem,
                folder,
                root,
                shown_root,
                default_timeout,
                fail,
                common,
                doc,
                declared_slots,
            )
        )
    for tool_skill in doc.skills:
        tool_skill.declared_name = tool_skill.name
        tool_skill.aliases = aliases_of(tool_skill.name, tool_skill.name, pack)
    first = doc.skills[0]
    if all(s.name != name for s in doc.skills):  # the SKILL.md's own name reaches its first tool
        first.aliases = (*first.aliases, *aliases_of(raw_name, name, pack), name)
    return doc


def _our_tools(tools: Any) -> bool:
    """Whether ``tools`` declares tools of ours: a list with at least one entry with an ``impl``
    (other entries are then errors of ours, reported as such)."""
    return isinstance(tools, list) and any(isinstance(t, dict) and "impl" in t for t in tools)


def _optional_text(meta: dict[str, Any], key: str, fail: Any, name: str) -> str | None:
    value = meta.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise fail(f"{key} must be a string", key, name)
    return value.strip() or None


def _scope(metadata: dict[str, Any], fail: Any, name: str) -> str:
    """``metadata.ongrid.scope``: manager (the default), host or edge (the same as host)."""
    ongrid = metadata.get("ongrid")
    raw = ongrid.get("scope", SCOPE_MANAGER) if isinstance(ongrid, dict) else SCOPE_MANAGER
    scope = parse_scope(raw)
    if scope is None:
        raise fail(
            f"metadata.ongrid.scope must be manager, host or edge, got {raw!r}", "metadata", name
        )
    return scope


def _activation(
    meta: dict[str, Any], metadata: dict[str, Any], fail: Any, name: str, doc: SkillDoc
) -> tuple[str | None, tuple[str, ...]]:
    top = meta.get("activation")
    ongrid = metadata.get("ongrid") if isinstance(metadata.get("ongrid"), dict) else {}
    nested = ongrid.get("activation") if ongrid else None
    chosen = nested if nested is not None else top
    if nested is not None and top is not None and nested != top:
        doc.warnings.append(
            ("activation", "metadata.ongrid.activation overrides the top-level activation")
        )
    if chosen is None:
        return None, ()
    if not isinstance(chosen, dict):
        raise fail("activation must be a mapping {mode, keywords}", "activation", name)
    mode = chosen.get("mode", "always")
    if mode not in ("always", "keyword"):
        raise fail(f"activation mode must be always or keyword, got {mode!r}", "activation", name)
    keywords = chosen.get("keywords") or []
    if not isinstance(keywords, list) or not all(isinstance(k, str) and k for k in keywords):
        raise fail("activation keywords must be a list of strings", "activation", name)
    if mode == "keyword" and not keywords:
        raise fail("keyword activation needs at least one keyword", "activation", name)
    return str(mode), tuple(k.lower() for k in keywords)


def _tool(
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
    doc: SkillDoc,
    declared_slots: Any = None,
) -> Skill:
    where = f"tools[{index}]"
    if not isinstance(tool, dict):
        raise fail(f"{where} must be a mapping", "tools", doc.name)
    tname = tool.get("name")
    if not isinstance(tname, str) or not NAME_RE.fullmatch(tname) or len(tname) > 64:
        raise fail(f"{where}.name {tname!r} must match [a-z0-9_]+ (≤ 64)", "tools", doc.name)
    for key in tool:
        if key not in TOOL_KEYS:
            doc.warnings.append(("tools", f"{where}: unknown key {key!r} is ignored"))
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
    tdesc = tool.get("description")
    skill = Skill(
        name=tname,
        description=tdesc.strip() if isinstance(tdesc, str) and tdesc.strip() else description,
        skill_class=skill_class,
        category="native",
        kind="native",
        timeout_seconds=timeout or default_timeout,
        confirmation_required=tool.get("confirmation") == "required",
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


def read_body(skill: Skill) -> str:
    """The Markdown body of the SKILL.md a skill came from (read on demand, not kept)."""
    return parse_frontmatter(read_text(skill.origin), skill.origin, tolerant=True).body


__all__ = ["SkillDoc", "load_skill_md", "normalise_name", "read_body"]
