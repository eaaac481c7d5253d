"""``ongrid-skills triggers …`` and ``ongrid-skills schedules …``: the alert triggers and the
schedules of a server (SPEC §21, docs/triggers.md), over its REST API.

``list`` and ``show`` need an operator's token; changing needs an admin's. A trigger or a
schedule is given as a JSON document (``--file PATH``, ``-`` for stdin), the body of
``PUT /v1/triggers/{name}`` or ``PUT /v1/schedules/{name}``. Creating a trigger prints its
token once, on stdout (and nothing else), so that a script can capture it; ``triggers token``
replaces it.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import click

from ongrid_skills.doors.cli import output
from ongrid_skills.doors.cli.output.tables import Column, Table
from ongrid_skills.doors.cli.remote import Remote, fail, remote_options


def register(cli: click.Group) -> None:
    cli.add_command(triggers)
    cli.add_command(schedules)


def _document(path: str) -> Any:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        return json.loads(text)
    except (OSError, ValueError) as exc:
        fail(f"cannot read a JSON document from {path}: {exc}")


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


# ---- triggers ---------------------------------------------------------------------------------
@click.group()
def triggers() -> None:
    """Alert triggers: Alertmanager (or any JSON sender) starting skills and agent runs."""


@triggers.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/triggers.")
@output.output_option
@remote_options
def triggers_list(as_json: bool, output_format: str | None, url: str, token: str | None) -> None:
    """List the triggers, their rules and their last starts."""
    body = Remote(url, token).call("GET", "/v1/triggers")

    def table() -> Table:
        rows = Table(
            [
                Column("NAME", key=True),
                Column("ROLE"),
                Column("RULES", flexible=True),
                Column("LAST START"),
            ]
        )
        for item in body["items"]:
            last = item["recent"][0] if item["recent"] else None
            started = f"{last['kind']} {_when(last['created_at'])}" if last else "-"
            rules = ", ".join(r.get("name", "?") for r in item["rules"])
            rows.rows.append([item["name"], item["role"], rules, started])
        return rows

    fmt = output.resolve(as_json, output_format)
    output.emit(fmt, data=body, json_text=json.dumps(body), table=table, empty="no triggers")


@triggers.command("show")
@click.argument("name")
@remote_options
def triggers_show(name: str, url: str, token: str | None) -> None:
    """Print one trigger as JSON: its rules and what it started lately."""
    click.echo(json.dumps(Remote(url, token).call("GET", f"/v1/triggers/{name}"), indent=2))


@triggers.command("set")
@click.argument("name")
@click.option("--file", "path", required=True, help="The trigger's JSON document ('-': stdin).")
@remote_options
def triggers_set(name: str, path: str, url: str, token: str | None) -> None:
    """Create a trigger (its token is printed once) or replace its rules."""
    body = Remote(url, token).call("PUT", f"/v1/triggers/{name}", json=_document(path))
    if "token" in body:
        click.echo(body["token"])
        click.echo(f"trigger {name} created; its token is printed above, once", err=True)
    else:
        click.echo(f"trigger {name} updated", err=True)


@triggers.command("token")
@click.argument("name")
@remote_options
def triggers_token(name: str, url: str, token: str | None) -> None:
    """Give a trigger a new token (printed once); the old one stops working."""
    click.echo(Remote(url, token).call("POST", f"/v1/triggers/{name}/token")["token"])


@triggers.command("delete")
@click.argument("name")
@remote_options
def triggers_delete(name: str, url: str, token: str | None) -> None:
    """Delete a trigger; what it started goes on."""
    Remote(url, token).call("DELETE", f"/v1/triggers/{name}")
    click.echo(f"trigger {name} deleted", err=True)


# ---- schedules --------------------------------------------------------------------------------
@click.group()
def schedules() -> None:
    """Schedules: cron with a time zone starting safe skill calls and agent runs."""


@schedules.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/schedules.")
@output.output_option
@remote_options
def schedules_list(as_json: bool, output_format: str | None, url: str, token: str | None) -> None:
    """List the schedules: cron, next firing, last outcome."""
    body = Remote(url, token).call("GET", "/v1/schedules")

    def table() -> Table:
        rows = Table(
            [
                Column("NAME", key=True),
                Column("CRON"),
                Column("ZONE"),
                Column("NEXT"),
                Column("LAST", flexible=True),
            ]
        )
        for item in body["items"]:
            last = item["recent"][0] if item["recent"] else None
            outcome = (
                f"{last.get('status') or last['kind']} {_when(last['fire_time'])}" if last else "-"
            )
            upcoming = "paused" if item["paused"] else _when(item["next_fire_at"])
            rows.rows.append(
                [item["name"], item["cron"], item.get("timezone", "UTC"), upcoming, outcome]
            )
        return rows

    fmt = output.resolve(as_json, output_format)
    output.emit(fmt, data=body, json_text=json.dumps(body), table=table, empty="no schedules")


@schedules.command("show")
@click.argument("name")
@remote_options
def schedules_show(name: str, url: str, token: str | None) -> None:
    """Print one schedule as JSON: its document, next firing and last outcomes."""
    click.echo(json.dumps(Remote(url, token).call("GET", f"/v1/schedules/{name}"), indent=2))


@schedules.command("set")
@click.argument("name")
@click.option("--file", "path", required=True, help="The schedule's JSON document ('-': stdin).")
@remote_options
def schedules_set(name: str, path: str, url: str, token: str | None) -> None:
    """Create or replace a schedule (its next firing counts from now)."""
    body = Remote(url, token).call("PUT", f"/v1/schedules/{name}", json=_document(path))
    click.echo(f"schedule {name} saved; next firing {_when(body['next_fire_at'])}", err=True)


def _action(verb: str, doc: str) -> None:
    @schedules.command(verb, help=doc)
    @click.argument("name")
    @remote_options
    def command(name: str, url: str, token: str | None) -> None:
        body = Remote(url, token).call("POST", f"/v1/schedules/{name}/{verb}")
        click.echo(json.dumps(body))


_action("pause", "Pause a schedule (it fires nothing until resumed).")
_action("resume", "Resume a schedule; firings missed while paused are not run.")
_action("run", "Fire a schedule now, once (paused or not).")


@schedules.command("delete")
@click.argument("name")
@remote_options
def schedules_delete(name: str, url: str, token: str | None) -> None:
    """Delete a schedule."""
    Remote(url, token).call("DELETE", f"/v1/schedules/{name}")
    click.echo(f"schedule {name} deleted", err=True)
