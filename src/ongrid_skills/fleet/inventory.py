"""A worker's inventory: what one host announces in the hosts bucket, and reading it back.

A worker writes one entry under its host id, again at every heartbeat, signed with its own key
(:mod:`.attest`); the inventory inside is::

    {"host": "web-1", "instance": "<new at each start>", "pid": 4242, "version": "0.1.0",
     "labels": {"env": "prod"}, "ttl": 15, "started_at": …, "heartbeat_at": …, "running": 0,
     "skills_digest": "<sha256 of the skills list>",
     "skills": [{"name": "clean_disk", "definition_hash": "<sha256>", "description": …,
                 "class": "mutating", "kind": "subprocess", "category": …, "schema": {…},
                 "timeout_seconds": 60, "when_to_use": null, "confirmation_required": false,
                 "env_allow": ["LANG"], "entry": "<sha256 of the entry's bytes>",
                 "builtin": null, "sandbox": {"profile": "strict", …} (absent: none declared),
                 "preview": {"args": {…}, "timeout_seconds": 10} or {"entry": "<sha256 of the
                 preview entry's bytes>", "timeout_seconds": 10} (absent: none declared)}]}

Only the worker's ``scope: host`` skills that are available are announced. The *fleet definition
hash* is the SHA-256 of the record itself (every field above but the hash, canonical JSON): name,
description, class, kind, category, schema, timeout, when to use, confirmation, allowed
environment, the sandbox declaration, the preview (its args, or its entry's bytes, and its
timeout), and the entry's bytes (or the built-in's name); not where
the files sit (paths, inodes, times). So one skill deployed on two hosts has one hash, an edited
one another, and no two records with one hash can differ in anything the gate reads: a manager
recomputes the hash of each record it reads and refuses one that does not match. A manager binds
approvals to it; a worker refuses a call whose hash, class or signature count is not its own.

:func:`parse` only makes sure what it reads is well-formed and bounded; whether a host may say it
is :mod:`.attest`'s question.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.fleet.bus import host_id_problem
from ongrid_skills.skills.model import SCOPE_HOST, PreviewSpec, Skill
from ongrid_skills.skills.sandbox import SandboxProblem, SandboxSpec, parse_sandbox
from ongrid_skills.skills.schemas import schema_problem
from ongrid_skills.skills.skill_json import MAX_NAME_LENGTH, NAME_RE
from ongrid_skills.types import SkillClass

MAX_SKILLS = 10_000
MAX_LABELS = 64
MAX_TEXT = 4096
MAX_SLOTS = 16
KINDS = ("subprocess", "native")


#: The fields of a skill record its definition hash covers (all of them but the hash).
DEFINITION_FIELDS = (
    "name", "description", "class", "kind", "category", "schema", "timeout_seconds",
    "when_to_use", "confirmation_required", "env_allow", "entry", "builtin", "credentials",
    "sandbox", "preview",
)  # fmt: skip
#: Optional fields left out of the hash when undeclared: the hashes of older records hold.
OPTIONAL_FIELDS = ("sandbox", "preview")


def definition_of(skill: Skill, credentials: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What one of this host's skills is, as announced (its record without the hash);
    ``credentials``: the name of the credential bound to each of its slots on this host (names
    only: the hash covers them, so a rebind is another definition)."""
    target = skill.target
    builtin = skill.builtin
    return {
        "name": skill.name,
        "description": skill.description,
        "class": skill.skill_class.value,
        "kind": "native" if skill.kind == "native" else "subprocess",
        "category": skill.category,
        "schema": skill.schema,
        "timeout_seconds": skill.timeout_seconds,
        "when_to_use": skill.when_to_use,
        "confirmation_required": skill.confirmation_required,
        "env_allow": list(target.env_allow) if target else None,
        "entry": target.content_digest() if target else None,
        "builtin": f"{builtin.__module__}.{builtin.__qualname__}" if builtin else None,
        "credentials": dict(sorted(credentials.items())) if credentials else None,
        "sandbox": skill.sandbox.to_dict() if skill.sandbox else None,
        "preview": preview_of(skill),
    }


def preview_of(skill: Skill) -> dict[str, Any] | None:
    """A skill's preview as announced (SPEC §20): its args, or the digest of its preview
    entry's bytes (the path stays on the host: the loader confined it to the skill's folder),
    and its timeout; None when it declares none."""
    spec = skill.preview
    if spec is None:
        return None
    if spec.target is not None:
        return {"entry": spec.target.content_digest(), "timeout_seconds": spec.timeout_seconds}
    return {"args": spec.args, "timeout_seconds": spec.timeout_seconds}


def hash_of(definition: Mapping[str, Any]) -> str:
    """The definition hash of a record: SHA-256 of its definition fields, canonical JSON."""
    body = {key: definition.get(key) for key in DEFINITION_FIELDS}
    for key in OPTIONAL_FIELDS:  # absent when undeclared: older hashes still hold
        if body[key] is None:
            del body[key]
    raw = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def definition_hash(skill: Skill, credentials: Mapping[str, str] | None = None) -> str:
    """The fleet definition hash of one of this host's skills (see the module docstring)."""
    return hash_of(definition_of(skill, credentials))


def hosted(skills: Iterable[Skill]) -> list[Skill]:
    """The skills a worker announces: host-scoped, available and runnable, by name."""
    return sorted(
        (s for s in skills if s.scope == SCOPE_HOST and s.available and s.kind != "instructions"),
        key=lambda s: s.name,
    )


def record_of(skill: Skill, credentials: Mapping[str, str] | None = None) -> dict[str, Any]:
    definition = definition_of(skill, credentials)
    return {"name": skill.name, "definition_hash": hash_of(definition), **definition}


def skills_digest(records: list[dict[str, Any]]) -> str:
    raw = json.dumps(records, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SkillRecord:
    """One announced skill, checked."""

    name: str
    definition_hash: str
    description: str
    skill_class: SkillClass
    kind: str
    category: str
    schema: dict[str, Any]
    timeout_seconds: int
    when_to_use: str | None
    confirmation_required: bool
    #: Slot -> the name of the credential the host binds to it (never a value).
    credentials: tuple[tuple[str, str], ...] = ()
    #: What the host's kernel lets a call of it touch (SPEC §20), as the host declares it.
    sandbox: SandboxSpec | None = None
    #: Its preview as the host announces it (:func:`preview_of`); run on that host only.
    preview: PreviewSpec | None = None


@dataclass(slots=True)
class Announcement:
    """One host's entry, checked (:func:`parse`)."""

    host: str
    instance: str
    pid: int
    version: str
    labels: dict[str, str]
    ttl: float
    started_at: float
    heartbeat_at: float
    running: int
    skills_digest: str
    raw_skills: list[Any] = field(default_factory=list)


class BadEntry(ValueError):
    """An entry of the hosts bucket that is not a well-formed announcement."""


def parse(value: bytes, key: str) -> Announcement:
    """An inventory's announcement (its skills still raw: :func:`parse_skills`); BadEntry if
    not. Its host may differ from the ``key`` it was found under: the caller says so."""
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        raise BadEntry("not JSON") from None
    if not isinstance(data, dict):
        raise BadEntry("not a JSON object")
    host = _text(data, "host", 128)
    if host_id_problem(key) is not None or host_id_problem(host) is not None:
        raise BadEntry(f"host {host[:100]!r} under key {key[:128]!r}")
    labels = data.get("labels") or {}
    if (
        not isinstance(labels, dict)
        or len(labels) > MAX_LABELS
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
    ):
        raise BadEntry("labels must be a mapping of text")
    skills = data.get("skills")
    if not isinstance(skills, list) or len(skills) > MAX_SKILLS:
        raise BadEntry(f"skills must be a list of at most {MAX_SKILLS}")
    return Announcement(
        host=host,
        instance=_text(data, "instance", 64),
        pid=_number(data, "pid", int),
        version=_text(data, "version", 64),
        labels={k[:128]: v[:256] for k, v in labels.items()},
        ttl=float(_number(data, "ttl", float)),
        started_at=float(_number(data, "started_at", float)),
        heartbeat_at=float(_number(data, "heartbeat_at", float)),
        running=_number(data, "running", int),
        skills_digest=_text(data, "skills_digest", 64),
        raw_skills=skills,
    )


def parse_skills(raw: list[Any]) -> list[SkillRecord]:
    """The announced skills, each checked whole (its hash recomputed): a record one host
    announced never stands for another's. A malformed record is a BadEntry."""
    out: list[SkillRecord] = []
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, dict):
            raise BadEntry("a skill record that is not an object")
        name, digest = item.get("name"), item.get("definition_hash")
        if not isinstance(name, str) or not isinstance(digest, str):
            raise BadEntry("a skill record without name or definition_hash")
        if name in seen:
            raise BadEntry(f"skill {name[:64]!r} announced twice")
        seen.add(name)
        out.append(_record(item, name, digest))
    return out


def _record(item: dict[str, Any], name: str, digest: str) -> SkillRecord:
    if not NAME_RE.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise BadEntry(f"skill name {name[:64]!r} is not a skill name")
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise BadEntry(f"skill {name}: definition_hash is not a SHA-256")
    try:
        skill_class = SkillClass(str(item.get("class")))
    except ValueError:
        raise BadEntry(f"skill {name}: unknown class") from None
    kind = item.get("kind")
    if kind not in KINDS:
        raise BadEntry(f"skill {name}: kind must be subprocess or native")
    schema = item.get("schema")
    problem = schema_problem(schema)
    if problem is not None or not isinstance(schema, dict):
        raise BadEntry(f"skill {name}: {problem}")
    timeout = item.get("timeout_seconds")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0:
        raise BadEntry(f"skill {name}: timeout_seconds must be a positive integer")
    when = item.get("when_to_use")
    names = item.get("credentials") or {}
    if (
        not isinstance(names, dict)
        or len(names) > MAX_SLOTS
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 64
            for k, v in names.items()
        )
    ):
        raise BadEntry(f"skill {name}: credentials must map slot names to credential names")
    try:
        sandbox = parse_sandbox(item.get("sandbox"))
    except SandboxProblem as exc:
        raise BadEntry(f"skill {name}: sandbox {exc}") from None
    preview = _preview(item.get("preview"), name, timeout)
    try:
        recomputed = hash_of(item)
    except (TypeError, ValueError, RecursionError):
        raise BadEntry(f"skill {name}: a record that is not canonical JSON") from None
    if recomputed != digest:
        raise BadEntry(f"skill {name}: definition_hash does not cover the definition announced")
    return SkillRecord(
        name=name,
        definition_hash=digest,
        description=_text(item, "description", MAX_TEXT) or name,
        skill_class=skill_class,
        kind=str(kind),
        category=_text(item, "category", 128) or "host",
        schema=schema,
        timeout_seconds=timeout,
        when_to_use=when[:MAX_TEXT] if isinstance(when, str) else None,
        confirmation_required=item.get("confirmation_required") is True,
        credentials=tuple(sorted(names.items())),
        sandbox=sandbox,
        preview=preview,
    )


def _preview(raw: Any, name: str, skill_timeout: int) -> PreviewSpec | None:
    """An announced preview, checked: ``args`` (a non-empty object) or ``entry`` (a SHA-256),
    and a timeout within the skill's. On the manager it only says a preview exists, its args
    and its timeout: the host runs it, with its own copy of what it announced."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"args", "entry", "timeout_seconds"}:
        raise BadEntry(f"skill {name}: preview must be an object of args or entry, and a timeout")
    timeout = raw.get("timeout_seconds")
    if type(timeout) is not int or not 0 < timeout <= skill_timeout:
        raise BadEntry(f"skill {name}: preview.timeout_seconds must be within the skill's")
    args, entry = raw.get("args"), raw.get("entry")
    if ("args" in raw) == ("entry" in raw):
        raise BadEntry(f"skill {name}: preview needs exactly one of args and entry")
    if "args" in raw:
        if not isinstance(args, dict) or not args:
            raise BadEntry(f"skill {name}: preview.args must be a non-empty object")
        return PreviewSpec(timeout_seconds=timeout, args=args)
    if entry is not None and (  # None: the file changed since its load (it will not run)
        not isinstance(entry, str) or len(entry) != 64 or entry.strip("0123456789abcdef")
    ):
        raise BadEntry(f"skill {name}: preview.entry must be the SHA-256 of its bytes")
    return PreviewSpec(timeout_seconds=timeout)


def _text(data: Mapping[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if not isinstance(value, str) or len(value) > limit:
        raise BadEntry(f"{key} must be text of at most {limit} characters")
    return value


def _number(data: Mapping[str, Any], key: str, kind: type) -> Any:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadEntry(f"{key} must be a number")
    if kind is int and not isinstance(value, int):
        raise BadEntry(f"{key} must be an integer")
    return value
