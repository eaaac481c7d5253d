"""Credential slots: what a skill says it needs, and how the values reach its process (SPEC §18).

A skill declares slots (``skill.json`` ``credentials``; a SKILL.md's
``metadata.requires.credentials``, the original's shape)::

    {"slot": "cloud", "label": "Cloud account", "fields": ["secret_id", "secret_key"],
     "inject": {"env": {"CLOUD_ID": "{{secret_id}}", "CLOUD_KEY": "{{secret_key}}"},
                "files": [{"path": "kubeconfig", "content": "{{kubeconfig}}", "mode": "0600"}]}}

Templates are plain substitution: ``{{ field }}`` names one of the slot's fields, nothing else
(no expressions, no filters). So what reaches the child is the values as stored, joined with the
template's own text, and the runner can mask every one of them (execution/masking.py). A
template naming anything but the slot's fields, a slot given twice, an env name the skill also
takes from the manager's environment (``env_allow``) and a file mode that lets others read are
build errors.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ongrid_skills.paths import ENV_NAME_RE

SLOT_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
FIELD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
#: Names the runner sets itself, or that would change how the child is started.
RESERVED_ENV = frozenset({"CREDENTIALS_DIRECTORY", "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH"})
#: File modes a credential file may have: read (and write) by the owner, maybe its group.
FILE_MODES = frozenset({0o400, 0o600, 0o440, 0o640})
DEFAULT_FILE_MODE = 0o600
_FILE_PATH_RE = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
MAX_SLOTS = 16


class SlotError(ValueError):
    """A slot declaration that cannot be loaded; the message names the slot and the key."""


@dataclass(frozen=True, slots=True)
class FileInjection:
    """One file written into the call's ``$CREDENTIALS_DIRECTORY``."""

    path: str
    content: str
    mode: int = DEFAULT_FILE_MODE


@dataclass(frozen=True, slots=True)
class CredentialSlot:
    """One credential a skill needs: its fields and where their values go."""

    slot: str
    label: str
    fields: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[FileInjection, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The declaration as shown (``show``, ``GET /v1/skills/{name}``): no value anywhere."""
        return {
            "slot": self.slot,
            "label": self.label,
            "fields": list(self.fields),
            "inject": {
                "env": dict(self.env),
                "files": [
                    {"path": f.path, "content": f.content, "mode": f"0{f.mode:o}"}
                    for f in self.files
                ],
            },
        }

    def render(self, values: Mapping[str, str]) -> tuple[dict[str, str], list[FileInjection]]:
        """The env entries and files of this slot with ``values`` (every field) filled in."""
        env = {name: fill(template, values) for name, template in self.env}
        files = [FileInjection(f.path, fill(f.content, values), f.mode) for f in self.files]
        return env, files


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{{ field }}`` replaced by its value (fields checked at load).

    >>> fill("Bearer {{ token }}", {"token": "abc"})
    'Bearer abc'
    """
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], template)


def placeholders(template: str) -> list[str]:
    """The names a template refers to, in order.

    >>> placeholders("{{a}}:{{ b }}")
    ['a', 'b']
    """
    return [m.group(1) for m in _PLACEHOLDER_RE.finditer(template)]


def parse_slots(value: Any, env_allow: tuple[str, ...] = ()) -> tuple[CredentialSlot, ...]:
    """The slots of a ``credentials`` list; :class:`SlotError` names what is wrong."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SlotError(f"credentials must be an array of slots, got {_type(value)}")
    if len(value) > MAX_SLOTS:
        raise SlotError(f"credentials declares {len(value)} slots, at most {MAX_SLOTS}")
    slots: list[CredentialSlot] = []
    seen: set[str] = set()
    env_owner: dict[str, str] = {}
    for index, item in enumerate(value):
        slot = _slot(item, index)
        if slot.slot in seen:
            raise SlotError(f"slot {slot.slot!r} is declared twice")
        seen.add(slot.slot)
        for name, _template in slot.env:
            if name in env_allow:
                raise SlotError(
                    f"slot {slot.slot!r}: env {name} is also in env_allow; a credential and the "
                    "manager's environment cannot both set it"
                )
            if name in env_owner:
                raise SlotError(
                    f"slot {slot.slot!r}: env {name} is already set by slot {env_owner[name]!r}"
                )
            env_owner[name] = slot.slot
        slots.append(slot)
    paths = [f.path for s in slots for f in s.files]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise SlotError(f"credential file {twice[0]!r} is written by two slots")
    return tuple(slots)


def _slot(item: Any, index: int) -> CredentialSlot:
    where = f"credentials[{index}]"
    if not isinstance(item, dict):
        raise SlotError(f"{where} must be an object, got {_type(item)}")
    unknown = sorted(set(item) - {"slot", "label", "fields", "inject", "description"})
    if unknown:
        raise SlotError(f"{where}: unknown key {unknown[0]!r} (slot, label, fields, inject)")
    name = item.get("slot")
    if not isinstance(name, str) or not SLOT_RE.fullmatch(name):
        raise SlotError(f"{where}: slot must match [a-z0-9][a-z0-9_-]*, got {json.dumps(name)}")
    where = f"slot {name!r}"
    label = item.get("label", name)
    if not isinstance(label, str) or not label.strip():
        raise SlotError(f"{where}: label must be a non-blank string")
    fields = item.get("fields")
    if not isinstance(fields, list) or not fields:
        raise SlotError(f"{where}: fields must be a non-empty array of names")
    for field in fields:
        if not isinstance(field, str) or not FIELD_RE.fullmatch(field):
            raise SlotError(f"{where}: field {json.dumps(field)} must match [A-Za-z_][A-Za-z0-9_]*")
    if len(set(fields)) != len(fields):
        raise SlotError(f"{where}: a field is named twice")
    inject = item.get("inject")
    if not isinstance(inject, dict) or not (inject.get("env") or inject.get("files")):
        raise SlotError(f"{where}: inject must set env or files (else the skill never sees it)")
    unknown = sorted(set(inject) - {"env", "files"})
    if unknown:
        raise SlotError(f"{where}: inject has an unknown key {unknown[0]!r} (env, files)")
    env = _env(inject.get("env") or {}, fields, where)
    files = _files(inject.get("files") or [], fields, where)
    return CredentialSlot(name, label.strip(), tuple(fields), env, files)


def _template(template: Any, fields: list[str], where: str) -> str:
    if not isinstance(template, str) or not template:
        raise SlotError(f"{where} must be a non-empty string template")
    names = placeholders(template)
    if not names:
        raise SlotError(f"{where} names no field: write {{{{{fields[0]}}}}}")
    for name in names:
        if name not in fields:
            raise SlotError(
                f"{where} names unknown field {name!r} in its template "
                f"(fields: {', '.join(fields)})"
            )
    return template


def _env(env: Any, fields: list[str], where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(env, dict):
        raise SlotError(f"{where}: inject.env must be an object of NAME: template")
    out = []
    for name, template in env.items():
        if not ENV_NAME_RE.fullmatch(name):
            raise SlotError(f"{where}: env name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
        if name in RESERVED_ENV:
            raise SlotError(f"{where}: env {name} is set by the runner, not a credential")
        out.append((name, _template(template, fields, f"{where}: env {name}")))
    return tuple(out)


def _files(files: Any, fields: list[str], where: str) -> tuple[FileInjection, ...]:
    if not isinstance(files, list):
        raise SlotError(f"{where}: inject.files must be an array of {{path, content, mode}}")
    out = []
    for index, item in enumerate(files):
        at = f"{where}: inject.files[{index}]"
        if not isinstance(item, dict):
            raise SlotError(f"{at} must be an object")
        unknown = sorted(set(item) - {"path", "content", "mode"})
        if unknown:
            raise SlotError(f"{at}: unknown key {unknown[0]!r} (path, content, mode)")
        path = item.get("path")
        if (
            not isinstance(path, str)
            or not _FILE_PATH_RE.fullmatch(path)
            or any(part in (".", "..") for part in path.split("/"))
        ):
            raise SlotError(
                f"{at}: path must be a relative path inside $CREDENTIALS_DIRECTORY "
                f"(letters, digits, . _ - and /; no . or ..), got {json.dumps(path)}"
            )
        content = _template(item.get("content"), fields, f"{at}: content")
        mode = _mode(item.get("mode"), at)
        out.append(FileInjection(path, content, mode))
    return tuple(out)


def _mode(raw: Any, at: str) -> int:
    if raw is None:
        return DEFAULT_FILE_MODE
    if not isinstance(raw, str) or not re.fullmatch(r"0?[0-7]{3}", raw):
        got = json.dumps(raw)
        got = json.dumps(raw)
        raise SlotError(f'{at}: mode must be an octal string such as "0600", got {got}')
    mode = int(raw, 8)
    if mode not in FILE_MODES:
        raise SlotError(
            f"{at}: mode {raw} is not allowed; a credential file is 0400, 0600, 0440 or 0640 "
            "(never executable, never readable by others)"
        )
    return mode


def _type(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


__all__ = [
    "DEFAULT_FILE_MODE",
    "CredentialSlot",
    "FileInjection",
    "SlotError",
    "fill",
    "parse_slots",
    "placeholders",
]
