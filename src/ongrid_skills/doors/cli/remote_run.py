"""``run NAME --server``: one call through a server's REST API, followed live, ending with the
exit code a local run would give.

The call is submitted with ``wait: false`` (``--yes`` is sent as ``confirm``), its timeline is
followed over Server-Sent Events and shown as a local run's is, by
:class:`~ongrid_skills.doors.cli.output.RunView` (stderr lines as they come, progress as a live
bar on a terminal; a broken stream is resumed, see :mod:`ongrid_skills.doors.cli.remote`), and
once it ended the Execution is read back, so that the result is the server's text byte for byte
(pretty-printed on a terminal unless ``--raw``, as a local run's). A call
that needs approval exits 4 naming the request and how to approve it, or with ``--wait`` is
followed through the approval to its end.

This module never runs a skill itself and never decides a permission: the server does both.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO
from urllib.parse import quote

import click

from ongrid_skills.doors.cli import args as cli_args
from ongrid_skills.doors.cli import output
from ongrid_skills.doors.cli.exits import EXIT_PENDING, EXIT_USAGE, status_exit
from ongrid_skills.doors.cli.remote import (
    Remote,
    StreamLost,
    error_of,
    exit_code,
    fail,
)
from ongrid_skills.doors.cli.target import Target
from ongrid_skills.errors import InvalidRequest, SkillError

#: The conventional exit status of a command stopped by Ctrl-C (the call goes on server-side).
EXIT_INTERRUPTED = 130
_PREFIX = '{"result": '


def wait_option(func: Any) -> Any:
    """``--wait``: on a server, follow a call through its approval to its end."""
    return click.option(
        "--wait", is_flag=True, help="On a server: wait for an approval, then the end."
    )(func)


def run(
    *,
    target: Target,
    name: str,
    words: Sequence[str],
    persona: str | None,
    confirm: bool,
    as_json: bool,
    raw: bool,
    wait: bool,
    dangerous: bool,
    stdin: TextIO,
) -> NoReturn:
    """Submit the call, follow it, print its outcome, exit with its code."""
    if dangerous:
        _refuse(
            InvalidRequest(
                "--i-know-it-is-dangerous is for local runs only: on a server a dangerous call "
                "needs two signers (--yes counts you as the first, if you may sign)"
            ),
            as_json,
        )
    remote = Remote(str(target.url), target.token, footnote=target.footnote)
    skill_path = f"/v1/skills/{quote(name, safe='')}"
    try:
        json_text, pairs = cli_args.split(words)
        if json_text is not None:
            args = cli_args.parse_json(stdin.read() if json_text == "-" else json_text)
        elif pairs:
            schema = remote.call("GET", skill_path).get("schema")
            args = cli_args.from_pairs(pairs, schema, name)
        else:
            args = {}
    except InvalidRequest as exc:
        _refuse(exc, as_json)
    body: dict[str, Any] = {"args": args, "confirm": confirm, "wait": False}
    if persona:
        body["persona"] = persona
    answer = remote.send("POST", f"{skill_path}/execute", json=body)
    if answer.status_code >= 400:
        code, message = error_of(answer)
        if as_json:
            click.echo(answer.text)
        remote.fail(f"{code}: {message}", exit_code(answer.status_code))
    execution = answer.json()
    try:
        if execution["status"] == "pending_approval":
            _announce(remote, execution, confirm, wait)
            if not wait:
                if as_json:
                    click.echo(answer.text)
                sys.exit(EXIT_PENDING)
        with output.RunView(name) as view:
            _follow(remote, execution, view)
    except KeyboardInterrupt:
        _interrupted(execution)
    final = remote.send("GET", f"/v1/executions/{execution['id']}")
    if final.status_code >= 400:
        code, message = error_of(final)
        remote.fail(f"{code}: {message}", exit_code(final.status_code))
    _print_outcome(final.text, as_json, raw)
    sys.exit(status_exit(final.json()["status"]))


def _announce(remote: Remote, execution: dict[str, Any], confirmed: bool, wait: bool) -> None:
    """Say that the call waits for approval: which request, how far, how to approve it."""
    approval_id = execution["approval_id"]
    request = remote.call("GET", f"/v1/approvals/{approval_id}")
    collected, required = request["signatures_collected"], request["signatures_required"]
    click.echo(
        f"ongrid-skills: {execution['skill']} ({request['class']}) needs approval: request "
        f"{approval_id}, {collected} of {required} signature(s)",
        err=True,
    )
    click.echo(
        f"ongrid-skills: to approve: ongrid-skills approvals approve {approval_id}", err=True
    )
    if request["class"] == "mutating" and not confirmed:
        click.echo("ongrid-skills: or run it again with --yes to confirm it yourself", err=True)
    if wait:
        click.echo(
            "ongrid-skills: waiting for the approval (Ctrl-C stops waiting; the request stays)",
            err=True,
        )


def _follow(remote: Remote, execution: dict[str, Any], view: output.RunView) -> None:
    """Show the call's timeline until its end (through a pending approval); the status of
    ``execution`` is kept up to date on the way."""
    execution_id = execution["id"]
    try:
        for event in remote.follow(f"/v1/executions/{execution_id}/events"):
            if event.event == "end":
                return
            data = json.loads(event.data)
            if event.event == "status":
                status = data.get("status")
                if execution["status"] == "pending_approval" and status == "running":
                    view.note("ongrid-skills: approved; running")
                execution["status"] = status
            elif isinstance(data, dict):
                view.show(event.event, data)
    except StreamLost as exc:
        view.close()
        fail(
            f"lost the call's events at {remote.url}: {exc}; it may still be running: "
            f"ongrid-skills executions logs -f {execution_id}"
        )


def _interrupted(execution: dict[str, Any]) -> NoReturn:
    """Ctrl-C: stop following. A pending request stays pending (exit 4); a running call goes
    on on the server (exit 130), and the message says how to stop it."""
    execution_id = execution["id"]
    if execution["status"] == "pending_approval":
        click.echo(f"ongrid-skills: stopped waiting; {execution_id} stays pending", err=True)
        sys.exit(EXIT_PENDING)
    click.echo(
        f"ongrid-skills: stopped following; the call goes on on the server "
        f"(ongrid-skills executions cancel {execution_id} stops it)",
        err=True,
    )
    sys.exit(EXIT_INTERRUPTED)


def _print_outcome(text: str, as_json: bool, raw: bool) -> None:
    """The Execution (``--json``), or its result (pretty on a terminal unless ``raw``, else
    verbatim), or what went wrong on stderr: as a local run prints them."""
    if as_json:
        click.echo(text)
        return
    execution = json.loads(text)
    if execution["status"] == "succeeded" and execution.get("result") is not None:
        output.print_result(result_text(text), raw=raw)
        return
    error = execution.get("error") or {}
    detail = f"{error['code']}: {error['message']}" if error else execution["status"]
    output.print_failure(execution["skill"], execution["status"], detail)


def result_text(execution_json: str) -> str:
    """The result of an Execution's JSON text exactly as the server sent it: the server splices
    the skill's stdout in verbatim after ``{"result": ``, so it is cut out, never re-serialised
    (key order, spacing and number spelling stay the skill's)."""
    if execution_json.startswith(_PREFIX):
        _, end = json.JSONDecoder().raw_decode(execution_json, len(_PREFIX))
        return execution_json[len(_PREFIX) : end]
    value = json.loads(execution_json)["result"]  # another server: its own spelling
    return json.dumps(value, ensure_ascii=False)


def _refuse(exc: SkillError, as_json: bool) -> NoReturn:
    """Refuse bad args before anything is sent, as a local run does (its error JSON too)."""
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}))
    fail(exc.message, EXIT_USAGE)
