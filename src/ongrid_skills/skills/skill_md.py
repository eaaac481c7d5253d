"""``SKILL.md``: YAML frontmatter + Markdown → native tools or one instructions skill (SPEC §6).

The format of Claude Code / Anthropic Agent Skills and openclaw, loaded unchanged:

- Required ``name`` and ``description``. A name that is not snake_case is normalised
  (lowercase, runs of other characters → ``_``, trimmed) with a warning: ``hello-world`` →
  ``hello_world``.
- ``tools: [...]``: each tool is a skill of its own (``impl: builtin:<module>.<function>`` runs
  in-process, ``impl: exec:<relative path>`` runs under the wire protocol of SPEC §4; its
  canonical path must lie under the SKILL.md's own folder, not only under the allow-list root).
- No ``tools``: an *instructions skill*; the model sees its name and description and reads the
  body on demand with ``read_skill``. So is a SKILL.md none of whose tools' impls exists in
  this build (those tools are listed unavailable on it: :mod:`.skill_md_tools`), and one that
  declares ``scope: edge`` without a tool (read on the manager; a warning says so).
- ``metadata.os`` / ``metadata.requires.bins`` / ``metadata.requires.config`` not met, openclaw's
  ``metadata.openclaw`` requirements not met (:mod:`~ongrid_skills.skills.requirements`), a
  ``metadata.ongrid.min_ongrid_version`` newer than this build
  (:mod:`~ongrid_skills.skills.ongrid_block`), or a builtin impl that resolves to nothing beside
  tools that do: the skill is listed *unavailable* with the reason.
- ``metadata`` and its children written as one line of JSON text are read as the object they
  hold; ``metadata.<key>`` written as one dotted top-level key is folded into ``metadata``.
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
from ongrid_skills.skills.aliases import aliases_of
from ongrid_skills.skills.declared import cap_extra, cap_text
from ongrid_skills.skills.frontmatter import parse_frontmatter, read_text
from ongrid_skills.skills.model import SCOPE_MANAGER, Skill, parse_scope
from ongrid_skills.skills.notices import (
    ACTIVATION_OVERRIDDEN,
    CREDENTIALS_NOT_USED,
    EDGE_INSTRUCTIONS,
    FOREIGN_TOOLS,
    IMPL_UNAVAILABLE,
    NAME_NORMALISED,
    UNKNOWN_KEY,
    Notice,
)
from ongrid_skills.skills.ongrid_block import (
    declared_fields,
    min_version,
    parse_json_children,
    version_notice,
    version_problem,
)
from ongrid_skills.skills.requirements import (
    OPENCLAW_KEYS,
    metadata_mapping,
    ongrid_unmet,
    openclaw_block,
    openclaw_unmet,
)
from ongrid_skills.skills.schemas import EMPTY_OBJECT_SCHEMA
from ongrid_skills.skills.skill_json import MAX_NAME_LENGTH
from ongrid_skills.skills.skill_md_tools import build_tool, missing_impls
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS

KNOWN_KEYS = (
    "name",
    "description",
    "version",
    "when_to_use",
    "activation",
    "metadata",
    "tools",
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
    warnings: list[Notice] = field(default_factory=list)
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
        doc.warnings.append(
            Notice(NAME_NORMALISED, "name", f'name "{raw_name}" normalised to "{name}"')
        )
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
    metadata = parse_json_children(_fold_dotted(meta, metadata))
    activation, keywords = _activation(meta, metadata, fail, name, doc)
    scope = _scope(metadata, fail, name)
    problem = ongrid_unmet(metadata, config, fail, name)
    requires = metadata.get("requires")
    declared_slots = requires.get("credentials") if isinstance(requires, dict) else None
    claw = openclaw_block(metadata)
    if problem is None and claw is not None:
        problem = openclaw_unmet(*claw, config, doc.warnings)
    wanted = min_version(metadata)
    checked = version_notice(wanted)
    if checked is not None:
        doc.warnings.append(checked)
    problem = problem or version_problem(wanted)
    tools = meta.get("tools")
    if tools is not None and tools != [] and not _our_tools(tools):
        doc.warnings.append(
            Notice(
                FOREIGN_TOOLS,
                "tools",
                "tools are not declarations of ours (each needs a name and an impl): "
                "kept and shown as metadata, loaded as an instructions skill",
            )
        )
        tools = None
    extra = {k: v for k, v in meta.items() if k not in KNOWN_KEYS and not k.startswith("metadata.")}
    if tools is None and meta.get("tools"):
        extra["tools"] = meta["tools"]
    extra.update({f"metadata.{k}": v for k, v in metadata.items() if k not in KNOWN_METADATA_KEYS})
    for key in extra:
        if key != "tools" and key.removeprefix("metadata.") not in OPENCLAW_KEYS:
            doc.warnings.append(
                Notice(UNKNOWN_KEY, key, f"unknown key {key!r} is kept and shown, not used")
            )
    extra.update(declared_fields(metadata, doc.warnings))
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
    missing = missing_impls(tools)
    if tools is None or tools == [] or missing:
        doc.skills.append(
            _instructions(
                raw_name,
                name,
                description,
                problem,
                declared_slots,
                missing,
                pack,
                common,
                doc,
                default_timeout,
            )
        )
        return doc
    if not isinstance(tools, list):
        raise fail("tools must be a list", "tools", name)
    for index, tool in enumerate(tools):
        doc.skills.append(
            build_tool(
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
                doc.name,
                doc.warnings,
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


def _instructions(
    raw_name: str,
    name: str,
    description: str,
    problem: str | None,
    declared_slots: Any,
    missing: list[tuple[str, str, str]],
    pack: str | None,
    common: dict[str, Any],
    doc: SkillDoc,
    default_timeout: int,
) -> Skill:
    """The one instructions skill of a SKILL.md without tools of ours, or whose every tool's
    impl this build lacks (``missing``: listed unavailable on it, so its text still reaches
    the model). A host scope or credentials need a process: kept and shown, with a warning."""
    if missing:
        listed = ", ".join(f"{tool} ({reason})" for tool, _impl, reason in missing)
        doc.warnings.append(
            Notice(
                IMPL_UNAVAILABLE,
                "tools",
                f"no tool's impl exists in this build ({listed}): loaded as an instructions "
                "skill, those tools listed as unavailable",
            )
        )
    if declared_slots:
        doc.warnings.append(
            Notice(
                CREDENTIALS_NOT_USED,
                "metadata",
                "metadata.requires.credentials is kept and shown, but an instructions skill has "
                "no process to give a credential to",
            )
        )
    if common["scope"] != SCOPE_MANAGER:
        doc.warnings.append(
            Notice(
                EDGE_INSTRUCTIONS,
                "metadata",
                "scope edge (host) on a skill without a tool that runs: loaded as an "
                "instructions skill, read on the manager (nothing runs on a host)",
            )
        )
    return Skill(
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
        unavailable_tools=tuple(missing),
        **{**common, "scope": SCOPE_MANAGER},
    )


def _fold_dotted(meta: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """``metadata`` with top-level ``metadata.<key>`` keys (written dotted, as one line) folded
    in; a key ``metadata`` itself sets wins."""
    dotted = {k.removeprefix("metadata."): v for k, v in meta.items() if k.startswith("metadata.")}
    return {**dotted, **metadata} if dotted else metadata


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
            Notice(
                ACTIVATION_OVERRIDDEN,
                "activation",
                "metadata.ongrid.activation overrides the top-level activation",
            )
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


def read_body(skill: Skill) -> str:
    """The Markdown body of the SKILL.md a skill came from (read on demand, not kept); a
    Claude Code command file (:mod:`.commands`) may have no frontmatter: all of it then."""
    text = read_text(skill.origin)
    if skill.category == "command" and not text.lstrip().startswith("---"):
        return text
    return parse_frontmatter(text, skill.origin, tolerant=True).body


__all__ = ["SkillDoc", "load_skill_md", "normalise_name", "read_body"]
