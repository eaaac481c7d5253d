"""What each listing and ``show`` prints: the columns, the badges, the key/value view of a skill,
the lines of ``approvals watch``.

Builders only: each turns the data a command already has (skills, token rows, audit entries, a
server's JSON bodies and events) into a :class:`~ongrid_skills.doors.cli.output.tables.Table`, a
line of cells, or the lines of ``show``. A skill class is a coloured badge that says its word,
so it reads the same without colour. They never fetch anything and never decide between terminal
and pipe beyond calling the renderers of ``tables``/``terminal``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import click

from ongrid_skills.doors.cli.output.tables import (
    Cell,
    Column,
    Styled,
    Table,
    cell_text,
    rich_text,
)
from ongrid_skills.doors.cli.output.terminal import console, one_line, stdout_is_terminal
from ongrid_skills.skills.model import Skill

#: A skill class as a badge: colour for the eye, the word for everyone (and for NO_COLOR).
CLASS_STYLE = {"safe": "green", "mutating": "yellow", "dangerous": "bold red"}
#: Statuses of executions and approvals, by how they ended.
STATUS_STYLE = {
    "succeeded": "green",
    "approved": "green",
    "active": "green",
    "running": "cyan",
    "pending": "cyan",
    "pending_approval": "cyan",
    "failed": "red",
    "timed_out": "red",
    "output_too_large": "red",
    "interrupted": "red",
    "invalid_args": "red",
    "denied": "yellow",
    "rejected": "yellow",
    "expired": "yellow",
    "cancelled": "yellow",
}

#: The events of ``approvals watch`` that are not statuses.
WATCH_STYLE = {"requested": "cyan", "signed": "cyan", "void": "yellow"}


def badge(skill_class: str) -> Styled:
    return Styled(skill_class, CLASS_STYLE.get(skill_class, ""))


def status(value: str) -> Styled:
    return Styled(value, STATUS_STYLE.get(value, ""))


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def skills_table(skills: Iterable[Mapping[str, Any]]) -> Table:
    """Skills as SkillSummary bodies (``skill.summary()`` here, ``GET /v1/skills`` on a server)."""
    table = Table(
        [
            Column("NAME", key=True),
            Column("CLASS"),
            Column("CATEGORY"),
            Column("DESCRIPTION", flexible=True),
        ]
    )
    for skill in skills:
        description: Cell = one_line(str(skill["description"]), 80)
        if not skill.get("available", True):
            reason = one_line(str(skill.get("unavailable_reason") or ""))
            description = (
                one_line(str(skill["description"]), 80),
                Styled(f"  [unavailable: {reason}]", "red"),
            )
        row: list[Cell] = [
            str(skill["name"]),
            badge(str(skill["class"])),
            str(skill["category"]),
            description,
        ]
        table.rows.append(row)
    return table


def tokens_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    table = Table(
        [
            Column("ID", key=True),
            Column("NAME", key=True),
            Column("ROLE"),
            Column("CREATED"),
            Column("STATE"),
        ]
    )
    for row in rows:
        revoked = row["revoked_at"]
        state = Styled(f"revoked {revoked}", "dim") if revoked else status("active")
        table.rows.append([row["id"], row["name"], row["role"], row["created_at"], state])
    return table


def credentials_table(rows: Iterable[Mapping[str, Any]]) -> Table:
    """Credentials: names, field kinds and bindings (no list row ever holds a value)."""
    table = Table(
        [
            Column("NAME", key=True),
            Column("FIELDS"),
            Column("BOUND TO"),
            Column("CHANGED"),
            Column("LAST USED"),
        ]
    )
    for row in rows:
        fields = ", ".join(f"{name} ({kind})" for name, kind in row["fields"].items())
        bound = ", ".join(
            f"{b.get('skill') or 'pack ' + str(b.get('pack'))}/{b['slot']}" for b in row["bindings"]
        )
        changed = row["rotated_at"] or row["created_at"]
        used = row["last_used_at"] or Styled("never", "dim")
        table.rows.append([row["name"], fields, bound or Styled("nothing", "dim"), changed, used])
    return table


def audit_table(entries: Iterable[Mapping[str, Any]], when: Any) -> Table:
    """``when`` turns an entry's ``ts`` into the time shown (the store's ISO format)."""
    table = Table(
        [
            Column("SEQ", justify="right", key=True),
            Column("TIME"),
            Column("ACTOR"),
            Column("ACTION"),
            Column("SUBJECT", key=True),
            Column("DATA", flexible=True),
        ]
    )
    for e in entries:
        data = one_line(_compact(e["data"]), 160)
        table.rows.append(
            [str(e["seq"]), when(e["ts"]), e["actor"], e["action"], e["subject"] or "-", data]
        )
    return table


def approvals_table(items: Iterable[Mapping[str, Any]]) -> Table:
    """The inbox; a REVIEW column when a reviewer has read any of its requests."""
    rows = list(items)
    reviewed = any(a.get("review") for a in rows)
    table = Table(
        [
            Column("ID", key=True),
            Column("STATUS"),
            Column("SKILL"),
            Column("CLASS"),
            Column("SIGNED"),
            Column("REQUESTED BY"),
            *([Column("REVIEW")] if reviewed else []),
            Column("ARGS", flexible=True),
        ]
    )
    for a in rows:
        signed = f"{a['signatures_collected']}/{a['signatures_required']}"
        args = one_line(_compact(a["args"]), 160)
        by = a["requested_by"] or "-"
        names = ", ".join(f"{slot}={name}" for slot, name in (a.get("credentials") or {}).items())
        skill = f"{a['skill']} [{names}]" if names else a["skill"]  # credential names, no value
        pack = (a.get("preview") or {}).get("pack")
        if isinstance(pack, dict):  # install_skill: which pack, and whose signature it bears
            args = one_line(f"{pack_note(pack)} {args}", 240)
        cells: list[Cell] = [a["id"], status(a["status"]), skill, badge(a["class"]), signed, by]
        table.rows.append([*cells, *([review(a)] if reviewed else []), args])
    return table


def review(a: Mapping[str, Any]) -> str:
    """The reviewer's word on a request, in one cell: approve, reject (with ``*`` when it
    counted as the confirmation), failed, reviewing, or ``-`` (no reviewer)."""
    r = a.get("review")
    if not r:
        return "-"
    if r.get("decision"):
        return f"{r['decision']}{'*' if r.get('counted') else ''}"
    return str(r.get("status") or "-")


def pack_note(pack: Mapping[str, Any]) -> str:
    """An install_skill request's pack in one line: id@version, signer and trust, skills."""
    signer = pack.get("signer") or {}
    key = f"{signer.get('key')} ({signer.get('trust')})" if signer.get("key") else "unsigned"
    skills = ", ".join(f"{s.get('name')} ({s.get('class')})" for s in pack.get("skills") or [])
    return one_line(
        f"pack={pack.get('id')}@{pack.get('version')} signer={key} skills: {skills or 'none'}",
        240,
    )


def executions_table(items: Iterable[Mapping[str, Any]]) -> Table:
    table = Table(
        [
            Column("ID", key=True),
            Column("CREATED"),
            Column("STATUS"),
            Column("SKILL"),
            Column("REQUESTED BY"),
        ]
    )
    for e in items:
        table.rows.append(
            [e["id"], e["created_at"], status(e["status"]), e["skill"], e["requested_by"] or "-"]
        )
    return table


def approval_event(kind: str, a: Mapping[str, Any]) -> tuple[str | Styled, ...]:
    """One line of ``approvals watch``: the event, then the request (its args when it is new,
    its signers once signed, else why it ended). The event and the class are coloured words."""
    signed = f"{a['signatures_collected']}/{a['signatures_required']}"
    line: list[str | Styled] = [
        Styled(kind, STATUS_STYLE.get(kind) or WATCH_STYLE.get(kind, "")),
        " " * max(0, 9 - len(kind)),
        f" {a['id']}  {a['skill']:<20} ",
        badge(a["class"]),
        " " * max(0, 9 - len(a["class"])),
        f" {signed} by {a['requested_by']}",
    ]
    signers = [s["principal"] for s in a.get("signatures", []) if s.get("decision") == "approve"]
    if kind == "requested":
        line.append(f"  args={_compact(a['args'])}")
        pack = (a.get("preview") or {}).get("pack")
        if isinstance(pack, dict):  # install_skill: the pack the signers would install
            line.append(f"  {pack_note(pack)}")
    elif kind == "reviewed" and a.get("review"):
        r = a["review"]
        said = r.get("decision") or r.get("note") or r.get("status")
        line.append(f"  reviewer {r.get('persona')}: {one_line(str(said), 160)}")
    elif kind == "previewed" and isinstance((a.get("preview") or {}).get("run"), dict):
        run = a["preview"]["run"]
        error = run.get("error") or {}
        said = (
            f"preview: {run.get('result')}"
            if run.get("status") == "done"
            else f"preview failed ({error.get('code')}): {error.get('message')}"
        )
        line.append(f"  {one_line(said, 200)}")
    elif kind in ("signed", "approved") and signers:
        line.append(f"  signed by {', '.join(signers)}")
    elif a.get("reason"):
        line.append(f"  ({a['reason']})")
    return tuple(line)


def skill_fields(skill: Skill) -> list[tuple[str, Cell]]:
    """What ``show`` says about a skill, key by key, before its schema."""
    summary = skill.summary()
    fields: list[tuple[str, Cell]] = [
        ("name", skill.name),
        ("description", skill.description),
        ("class", badge(skill.skill_class.value)),
    ]
    fields += [(key, str(summary[key])) for key in ("category", "kind", "source")]
    fields.append(("timeout_seconds", str(skill.timeout_seconds)))
    if skill.target is not None:
        fields.append(("entry", skill.target.entry))
        fields.append(("env_allow", ", ".join(skill.target.env_allow) or "(none)"))
    fields.append(("manifest", skill.origin))
    if skill.sandbox is not None:  # as declared; the class's default may tighten it
        box = skill.sandbox
        parts = [box.profile, *(f"read {p}" for p in box.read), *(f"write {p}" for p in box.write)]
        parts.append("network" if box.network else "no network")
        fields.append(("sandbox", ", ".join(parts)))
    if skill.base_dir is not None:
        fields.append(("folder", skill.base_dir))
    for slot in skill.credentials:  # what it needs, never a value (bindings: credentials list)
        inject = [
            *(name for name, _ in slot.env),
            *(f"$CREDENTIALS_DIRECTORY/{f.path}" for f in slot.files),
        ]
        fields.append(
            (
                "credential",
                f"{slot.slot} ({slot.label}): {', '.join(slot.fields)} → {', '.join(inject)}",
            )
        )
    if skill.aliases:
        fields.append(("aliases", ", ".join(skill.aliases)))
    if skill.when_to_use:
        fields.append(("when_to_use", skill.when_to_use))
    if not skill.available:
        fields.append(("unavailable", Styled(skill.unavailable_reason or "", "red")))
    if skill.activation:
        keywords = f" ({', '.join(skill.keywords)})" if skill.keywords else ""
        fields.append(("activation", f"{skill.activation}{keywords}"))
    for key, value in sorted((skill.extra or {}).items(), key=lambda kv: str(kv[0])):
        if value is not None:
            fields.append((str(key), _compact(value)))
    return fields


def summary_fields(summary: Mapping[str, Any]) -> list[tuple[str, Cell]]:
    """What ``show`` says about a server's skill, from its SkillSummary (``GET /v1/skills/{name}``:
    no entry, folder or environment, which stay on the server)."""
    fields: list[tuple[str, Cell]] = [
        ("name", str(summary["name"])),
        ("description", str(summary["description"])),
        ("class", badge(str(summary["class"]))),
    ]
    fields += [(key, str(summary.get(key))) for key in ("category", "kind", "source")]
    fields.append(("timeout_seconds", str(summary.get("timeout_seconds"))))
    for slot in summary.get("credentials") or []:
        fields.append(("credential", f"{slot.get('slot')} ({slot.get('label', '')})"))
    if summary.get("when_to_use"):
        fields.append(("when_to_use", str(summary["when_to_use"])))
    if not summary.get("available", True):
        fields.append(("unavailable", Styled(str(summary.get("unavailable_reason") or ""), "red")))
    for key, value in sorted((summary.get("extra") or {}).items(), key=lambda kv: str(kv[0])):
        if value is not None:
            fields.append((str(key), _compact(value)))
    return fields


def print_skill(skill: Skill | Mapping[str, Any]) -> None:
    """``show``: a key/value view and the schema, drawn on a terminal, plain in a pipe (a
    Skill loaded here, or a server's SkillSummary)."""
    if isinstance(skill, Skill):
        print_fields(skill_fields(skill), [("schema", skill.schema)])
    else:
        print_fields(summary_fields(skill), [("schema", skill.get("schema"))])


def print_fields(fields: list[tuple[str, Cell]], blocks: list[tuple[str, Any]]) -> None:
    """A key/value view, then each block (a title and a JSON value, pretty-printed): drawn on a
    terminal, plain aligned ``key: value`` lines in a pipe."""
    if not stdout_is_terminal():
        for key, value in fields:
            click.echo(f"{key + ':':<16} {cell_text(value)}")
        for title, value in blocks:
            click.echo(f"{title}:")
            click.echo(json.dumps(value, indent=2, ensure_ascii=False))
        return
    from rich.json import JSON  # noqa: PLC0415 - lazy: terminal only
    from rich.table import Table as Grid  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    grid = Grid.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in fields:
        grid.add_row(Text(key), rich_text(value))
    out = console()
    out.print(grid)
    for title, value in blocks:
        out.print(Text(title, style="bold"))
        out.print(JSON.from_data(value, indent=2, ensure_ascii=False))
