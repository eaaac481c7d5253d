"""The commands that work on a server's records: ``approvals …`` (the inbox: list, show,
approve, reject, watch) and ``executions …`` (list, show, logs, cancel).

Every command takes ``--url``/``--token`` (or ``ONGRID_URL``/``ONGRID_TOKEN``), and every id
argument may be a unique prefix (:mod:`ongrid_skills.doors.cli.ids`). The lists print as the
local ones do (:mod:`ongrid_skills.doors.cli.output`: tables, ``-o``, empty lists said on
stderr), and so do the lines of ``approvals watch`` (coloured on a terminal, plain in a
pipe). One request or one Execution (``show``, ``approve``, ``reject``, ``cancel``) is a
key/value view on a terminal and the server's JSON with ``--json`` or in a pipe. HTTP errors
exit as :func:`ongrid_skills.doors.cli.remote.exit_code` says. These commands never open the
data dir and never run a skill: ``run --server`` is :mod:`ongrid_skills.doors.cli.remote_run`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ongrid_skills.doors.cli import output
from ongrid_skills.doors.cli.exits import EXIT_OK, status_exit
from ongrid_skills.doors.cli.ids import resolve
from ongrid_skills.doors.cli.remote import Remote, StreamLost, fail, remote_options


def register(cli: click.Group) -> None:
    cli.add_command(approvals)
    cli.add_command(executions)


# ---- approvals ------------------------------------------------------------------------------
@click.group()
def approvals() -> None:
    """The approval inbox of a server."""


@approvals.command("list")
@click.option("--status", default="pending", show_default=True, help="Or '' for all.")
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/approvals.")
@output.output_option
@remote_options
def approvals_list(
    status: str, as_json: bool, output_format: str | None, url: str, token: str | None
) -> None:
    """List the approval requests (the pending ones by default)."""
    fmt = output.resolve(as_json, output_format)
    params = {"status": status} if status else {}
    body = Remote(url, token).call("GET", "/v1/approvals", params=params)
    output.emit(
        fmt,
        data=body,
        json_text=json.dumps(body),
        table=lambda: output.approvals_table(body["items"]),
        empty=f"no {status} approvals" if status else "no approvals",
    )


@approvals.command("show")
@click.argument("approval_id")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON body (also what a pipe gets)."
)
@remote_options
def approvals_show(approval_id: str, as_json: bool, url: str, token: str | None) -> None:
    """Show one request: the call, its signatures, where it stands (JSON in a pipe)."""
    remote = Remote(url, token)
    approval_id = resolve(remote, "approval", approval_id)
    body = remote.call("GET", f"/v1/approvals/{approval_id}")
    output.print_approval(body, json.dumps(body), as_json=as_json)


@approvals.command("approve")
@click.argument("approval_id")
@click.option("--comment", help="Why: kept with the signature and in the audit chain.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON body (also what a pipe gets)."
)
@remote_options
def approvals_approve(
    approval_id: str, comment: str | None, as_json: bool, url: str, token: str | None
) -> None:
    """Sign a request (the last signature starts the call)."""
    _decide("approve", approval_id, comment, as_json, Remote(url, token))


@approvals.command("reject")
@click.argument("approval_id")
@click.option("--comment", help="Why: kept with the rejection and in the audit chain.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON body (also what a pipe gets)."
)
@remote_options
def approvals_reject(
    approval_id: str, comment: str | None, as_json: bool, url: str, token: str | None
) -> None:
    """Reject a request: it ends, and its call never runs."""
    _decide("reject", approval_id, comment, as_json, Remote(url, token))


def _decide(
    verb: str, approval_id: str, comment: str | None, as_json: bool, remote: Remote
) -> None:
    """POST ``approve`` or ``reject`` on the request ``approval_id`` names (a prefix resolved);
    print the request as it stands after."""
    approval_id = resolve(remote, "approval", approval_id)
    body = remote.call("POST", f"/v1/approvals/{approval_id}/{verb}", json={"comment": comment})
    output.print_approval(body, json.dumps(body), as_json=as_json)


@approvals.command("watch")
@click.option("--json", "as_json", is_flag=True, help='One {"event", "approval"} per line.')
@remote_options
def approvals_watch(as_json: bool, url: str, token: str | None) -> None:
    """Print the pending requests, then each request and decision as it happens, until
    Ctrl-C (exit 0): requested, signed, approved, rejected, expired, cancelled, void."""
    remote = Remote(url, token)
    shown: set[str] = set()  # requests already printed as requested (a reconnect resends them)
    ready = False
    try:
        for event in remote.follow("/v1/approvals/events", until=None):
            body = json.loads(event.data)
            if event.event == "ready":
                if not ready:
                    ready = True
                    pending = body.get("pending", 0)
                    click.echo(
                        f"ongrid-skills: watching the approvals of {remote.url} "
                        f"({pending} pending); Ctrl-C to stop",
                        err=True,
                    )
                continue
            if event.event == "requested":
                if body["id"] in shown:
                    continue
                shown.add(body["id"])
            if as_json:
                click.echo(json.dumps({"event": event.event, "approval": body}, ensure_ascii=False))
            else:
                output.print_line(output.approval_event(event.event, body))
    except StreamLost as exc:
        fail(f"lost the approvals stream of {remote.url}: {exc}")
    except KeyboardInterrupt:
        sys.exit(EXIT_OK)


# ---- executions -----------------------------------------------------------------------------
@click.group()
def executions() -> None:
    """Executions recorded by a server."""


@executions.command("list")
@click.option("--skill", help="Only calls of this skill.")
@click.option("--status", help="Only calls in this status, e.g. failed or pending_approval.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, 500),
    help="How many of the latest calls.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/executions.")
@output.output_option
@remote_options
def executions_list(
    skill: str | None,
    status: str | None,
    limit: int,
    as_json: bool,
    output_format: str | None,
    url: str,
    token: str | None,
) -> None:
    """List the latest calls, newest first."""
    fmt = output.resolve(as_json, output_format)
    params: dict[str, Any] = {"limit": limit}
    if skill:
        params["skill"] = skill
    if status:
        params["status"] = status
    body = Remote(url, token).call("GET", "/v1/executions", params=params)
    output.emit(
        fmt,
        data=body,
        json_text=json.dumps(body),
        table=lambda: output.executions_table(body["items"]),
        empty="no executions match" if skill or status else "no executions",
    )


@executions.command("show")
@click.argument("execution_id")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON body (also what a pipe gets)."
)
@remote_options
def executions_show(execution_id: str, as_json: bool, url: str, token: str | None) -> None:
    """Show one Execution: outcome, times, args and result (JSON in a pipe)."""
    remote = Remote(url, token)
    execution_id = resolve(remote, "execution", execution_id)
    body = remote.call("GET", f"/v1/executions/{execution_id}")
    output.print_execution_record(body, json.dumps(body), as_json=as_json)


@executions.command("logs")
@click.argument("execution_id")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Follow live events until the call ends, then exit with its code.",
)
@remote_options
def executions_logs(execution_id: str, follow: bool, url: str, token: str | None) -> None:
    """Print the timeline (stderr lines, progress, status changes): what happened so far, or
    with -f everything until the end, through a pending approval and a broken connection."""
    remote = Remote(url, token)
    execution_id = resolve(remote, "execution", execution_id)
    params = None if follow else {"follow": "false"}
    end: dict[str, Any] = {}
    try:
        for event in remote.follow(f"/v1/executions/{execution_id}/events", params=params):
            data = json.loads(event.data)
            if event.event == "end":
                end = data
            elif event.event == "stderr":
                click.echo(data.get("line", ""))
            elif event.event == "progress":
                click.echo(
                    f"[progress {data.get('progress')}/{data.get('total', '?')}] "
                    f"{data.get('message', '')}"
                )
            else:
                rest = {k: v for k, v in data.items() if k not in ("type", "ts")}
                click.echo(f"[{event.event}] {json.dumps(rest, ensure_ascii=False)}")
    except StreamLost as exc:
        fail(f"lost the events of {execution_id} at {remote.url}: {exc}")
    click.echo(f"[end] {end.get('status')}", err=True)
    sys.exit(status_exit(str(end.get("status"))) if follow else EXIT_OK)


@executions.command("cancel")
@click.argument("execution_id")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the JSON body (also what a pipe gets)."
)
@remote_options
def executions_cancel(execution_id: str, as_json: bool, url: str, token: str | None) -> None:
    """Cancel a running call (its process group is killed) or withdraw a pending request;
    show the Execution as it ended (JSON in a pipe)."""
    remote = Remote(url, token)
    execution_id = resolve(remote, "execution", execution_id)
    body = remote.call("POST", f"/v1/executions/{execution_id}/cancel")
    output.print_execution_record(body, json.dumps(body), as_json=as_json)
    click.echo(f"ongrid-skills: {execution_id} {body.get('status')}", err=True)
