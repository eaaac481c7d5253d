"""One approval request or one Execution of a server, for a person: ``approvals show|approve|
reject`` and ``executions show|cancel``.

On a terminal a key/value view (status and class as the lists colour them, the signatures one
per line, times as the server sent them) followed by the args and the result pretty-printed;
with ``--json``, or when stdout is not a terminal, the server's JSON body verbatim, one line, as
these commands always printed it (scripts rely on it: docs/cli.md). Text from the server is
shown, never obeyed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import click

from ongrid_skills.doors.cli.output.listings import badge, print_fields, status
from ongrid_skills.doors.cli.output.tables import Cell, Styled
from ongrid_skills.doors.cli.output.terminal import printable, stdout_is_terminal


def approval_fields(a: Mapping[str, Any]) -> list[tuple[str, Cell]]:
    """What a person reads of a request: where it stands, who asked, who signed."""
    collected, required = a.get("signatures_collected"), a.get("signatures_required")
    fields: list[tuple[str, Cell]] = [
        ("id", str(a["id"])),
        ("status", status(str(a["status"]))),
        ("skill", str(a["skill"])),
        ("class", badge(str(a["class"]))),
        ("signatures", f"{collected} of {required}"),
        ("requested_by", str(a.get("requested_by") or "-")),
    ]
    if a.get("persona"):
        fields.append(("persona", str(a["persona"])))
    for slot, name in (a.get("credentials") or {}).items():
        fields.append(("credential", f"{slot} = {name}"))
    for s in a.get("signatures") or []:
        said = f": {s['comment']}" if s.get("comment") else ""
        word = Styled(
            str(s.get("decision")), "green" if s.get("decision") == "approve" else "yellow"
        )
        fields.append(
            ("signed", (word, f" by {s.get('principal')} ({s.get('role')}) {s.get('at')}{said}"))
        )
    if a.get("reason"):
        fields.append(("reason", str(a["reason"])))
    fields += [("created_at", str(a.get("created_at")))]
    if a.get("status") == "pending":
        fields.append(("expires_at", str(a.get("expires_at"))))
    elif a.get("decided_at"):
        fields.append(("decided_at", str(a["decided_at"])))
    fields.append(("execution", str(a.get("execution_id"))))
    return fields


def execution_fields(e: Mapping[str, Any]) -> list[tuple[str, Cell]]:
    """What a person reads of a call: its outcome, who asked, when, how long."""
    fields: list[tuple[str, Cell]] = [
        ("id", str(e["id"])),
        ("skill", str(e["skill"])),
        ("status", status(str(e["status"]))),
    ]
    error = e.get("error")
    if error:
        fields.append(("error", Styled(f"{error.get('code')}: {error.get('message')}", "red")))
    if e.get("exit_code") is not None:
        fields.append(("exit_code", str(e["exit_code"])))
    if e.get("signal"):
        fields.append(("signal", str(e["signal"])))
    fields.append(("requested_by", str(e.get("requested_by") or "-")))
    for key in ("persona", "approval_id"):
        if e.get(key):
            fields.append((key, str(e[key])))
    for slot, name in (e.get("credentials") or {}).items():
        fields.append(("credential", f"{slot} = {name}"))
    for key in ("created_at", "started_at", "finished_at"):
        if e.get(key):
            fields.append((key, str(e[key])))
    if e.get("duration_ms") is not None:
        fields.append(("duration", f"{float(e['duration_ms']):.0f} ms"))
    if e.get("orphans_killed"):
        fields.append(("orphans_killed", str(e["orphans_killed"])))
    return fields


def print_approval(body: Mapping[str, Any], text: str, *, as_json: bool) -> None:
    """A request: the view on a terminal, ``text`` (the server's JSON) otherwise."""
    if as_json or not stdout_is_terminal():
        click.echo(text)
        return
    fields, blocks = approval_fields(body), [("args", body.get("args"))]
    run = (body.get("preview") or {}).get("run")
    if isinstance(run, dict):  # the skill's dry run (SPEC §20): what the call would do
        fields.append(("preview", preview_cell(run)))
        if run.get("status") == "done":
            blocks.append(("preview", preview_value(run)))
    print_fields(fields, blocks)


def preview_cell(run: Mapping[str, Any]) -> Cell:
    """Where a request's preview stands, in one cell: running, done, or failed and why."""
    state = str(run.get("status"))
    if state == "failed":
        error = run.get("error") or {}
        return Styled(f"failed ({error.get('code')}): {error.get('message')}", "red")
    if state == "done":
        return f"done in {run.get('duration_ms')} ms" + (", cut" if run.get("truncated") else "")
    return f"{state} (at most {run.get('timeout_seconds')} s)"


def preview_value(run: Mapping[str, Any]) -> Any:
    """A finished preview's result: its JSON when it parses (it may have been cut), else text."""
    text = str(run.get("result") or "")
    try:
        return json.loads(text)
    except ValueError:
        return text


def print_execution_record(body: Mapping[str, Any], text: str, *, as_json: bool) -> None:
    """An Execution: the view on a terminal, ``text`` (the server's JSON) otherwise."""
    if as_json or not stdout_is_terminal():
        click.echo(text)
        return
    blocks: list[tuple[str, Any]] = [("args", body.get("args"))]
    if body.get("result") is not None:
        blocks.append(("result", body["result"]))
    print_fields(execution_fields(body), blocks)
    tail = str(body.get("stderr_tail") or "")
    if tail and body.get("status") != "succeeded":  # why it failed, as the skill said it
        click.echo("stderr (last lines):")
        for line in tail.splitlines()[-10:]:
            click.echo(f"  {printable(line)}")
