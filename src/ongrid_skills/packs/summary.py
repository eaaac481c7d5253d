"""A pack's capability summary: what it brings, computed from the staged copy before anything
changes (``pack install --dry-run``, ``POST /v1/packs`` with ``dry_run``, the card of an
``install_skill`` request), and stored on the record of an installed version.

It says, as plain JSON: the pack (id, version, description, layout), its digest, its signer (key
fingerprint and whether the operator trusts it), the source; every skill with its class, scope,
kind and availability; every persona with its permission mode; what the skills need from this
host (executables, config keys, environment variables, credential slots); and every warning
the unpacked contents yield (the loader's and the lint's, the trust warning).

The requirements are read again from each SKILL.md's frontmatter (``metadata.requires`` and an
openclaw block's ``requires``), tolerantly: the loader has already judged the file, this only
lists names. It reads the staged files; it never runs, writes or fetches anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ongrid_skills.errors import ManifestError
from ongrid_skills.packs.contents import PackContents
from ongrid_skills.packs.source import StagedPack
from ongrid_skills.packs.trust import Trust, Verification
from ongrid_skills.skills.frontmatter import parse_frontmatter, read_text
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.requirements import metadata_mapping, openclaw_block

#: The requirement lists a summary collects, as SKILL.md names them.
_NEEDS = (("bins", "bins"), ("anyBins", "bins"), ("config", "config"), ("env", "env"))
#: At most this many names of one kind are listed (a hostile pack cannot grow a card unbounded).
MAX_NAMES = 100


def capability_summary(
    staged: StagedPack, verdict: Verification, contents: PackContents, source: str
) -> dict[str, Any]:
    """What ``staged`` brings, as JSON (see the module's docstring)."""
    manifest = staged.manifest
    skills = [_skill(skill) for skill in contents.skills]
    needs: dict[str, set[str]] = {"bins": set(), "config": set(), "env": set()}
    slots: set[str] = set()
    for item in skills:
        for kind, names in item["requires"].items():
            needs[kind].update(names)
        slots.update(item["credentials"])
    classes = {"safe": 0, "mutating": 0, "dangerous": 0}
    for skill in contents.skills:
        if skill.kind != "instructions":
            classes[skill.skill_class.value] += 1
    warnings = [problem.format() for problem in contents.warnings]
    if verdict.trust is not Trust.TRUSTED:
        why = "unsigned" if verdict.trust is Trust.UNSIGNED else "signed by a key not trusted"
        warnings.insert(0, f"signature: {why}")
    return {
        "id": manifest.id,
        "version": manifest.version,
        "description": manifest.description,
        "layout": staged.detected.layout.value,
        "digest": verdict.digest,
        "source": source,
        "signer": {
            "key": verdict.signer,
            "trust": verdict.trust.value,
            "trusted": verdict.trusted,
        },
        "skills": skills,
        "personas": [
            {
                "name": persona.name,
                "description": persona.description,
                "permission_mode": persona.permission_mode.value,
            }
            for persona in contents.personas
        ],
        "classes": classes,
        "requires": {
            "bins": _capped(needs["bins"]),
            "config": _capped(needs["config"]),
            "env": _capped(needs["env"]),
            "credentials": _capped(slots),
        },
        "warnings": warnings,
    }


def _skill(skill: Skill) -> dict[str, Any]:
    return {
        "name": skill.name,
        "class": skill.skill_class.value,
        "scope": skill.scope,
        "kind": skill.kind,
        "available": skill.available,
        "unavailable_reason": skill.unavailable_reason,
        "requires": _requires(skill),
        "credentials": [slot.slot for slot in skill.credentials],
    }


def _requires(skill: Skill) -> dict[str, list[str]]:
    """The executables, config keys and environment variables a SKILL.md skill declares."""
    found: dict[str, set[str]] = {"bins": set(), "config": set(), "env": set()}
    if skill.base_dir is None or skill.group is None:
        return {kind: [] for kind in found}
    path = os.path.join(skill.base_dir, "SKILL.md")
    try:
        meta = parse_frontmatter(read_text(path), path, tolerant=True).meta
    except ManifestError:
        return {kind: [] for kind in found}
    metadata = metadata_mapping(meta.get("metadata")) or {}
    blocks = [metadata.get("requires")]
    claw = openclaw_block(metadata)
    if claw is not None:
        blocks.append(claw[1].get("requires"))
    for block in blocks:
        if not isinstance(block, dict):
            continue
        for key, kind in _NEEDS:
            found[kind].update(_names(block.get(key)))
    return {kind: _capped(names) for kind, names in found.items()}


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and v.strip()]
    return []


def _capped(names: Iterable[str]) -> list[str]:
    return sorted({name[:128] for name in names})[:MAX_NAMES]


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary as lines a person reads (the CLI's dry run, an approval card's text)."""
    signer = summary.get("signer") or {}
    key = signer.get("key")
    trust = signer.get("trust", "unsigned")
    lines = [
        f"pack {summary['id']}@{summary['version']}: {summary.get('description') or ''}".rstrip(),
        f"source {summary.get('source')}",
        f"digest {summary.get('digest')}",
        f"signer {key} ({trust})" if key else "signer none (unsigned)",
    ]
    skills = summary.get("skills") or []
    lines.append(f"skills ({len(skills)}):")
    for skill in skills:
        note = "" if skill.get("available") else f"  unavailable: {skill.get('unavailable_reason')}"
        lines.append(
            f"  {skill['name']:<32} {skill['class']:<9} {skill['scope']:<7} {skill['kind']}{note}"
        )
    personas = summary.get("personas") or []
    if personas:
        lines.append(f"personas ({len(personas)}):")
        lines.extend(f"  {p['name']:<32} {p['permission_mode']}" for p in personas)
    requires = summary.get("requires") or {}
    for kind in ("bins", "config", "env", "credentials"):
        if requires.get(kind):
            lines.append(f"requires {kind}: {', '.join(requires[kind])}")
    lines.extend(f"warning: {w}" for w in summary.get("warnings") or [])
    return lines
