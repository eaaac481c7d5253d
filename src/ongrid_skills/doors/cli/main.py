"""The ``ongrid-skills`` command: the one place that reads env/files and maps errors to exit codes.

Exit codes (:mod:`ongrid_skills.doors.cli.exits`): 0 ok, 1 the skill failed, 2 usage or invalid
input, 3 denied by policy (or a confirmation is missing), 4 pending approval, 124 timed out. The
commands that talk to a server map the HTTP status instead
(:func:`ongrid_skills.doors.cli.remote.exit_code`): 403 → 3, other 4xx → 2, 5xx → 1. Commands
never run a call themselves: ``run`` goes through :func:`ongrid_skills.execution.pipeline.execute`,
like the Python API, or through a server's REST API (:mod:`ongrid_skills.doors.cli.remote_run`).
"""

from __future__ import annotations

import gc
import logging
import os
import shlex
import shutil
import sys
from typing import Any

import click

from ongrid_skills.doors.cli import args as cli_args
from ongrid_skills.doors.cli import automation as cli_automation
from ongrid_skills.doors.cli import catalogue, completion, output, remote_run, target
from ongrid_skills.doors.cli import chat as cli_agent
from ongrid_skills.doors.cli import config_command as cli_config
from ongrid_skills.doors.cli import credentials as cli_credentials
from ongrid_skills.doors.cli import mcp as cli_mcp
from ongrid_skills.doors.cli import pack as cli_pack
from ongrid_skills.doors.cli import pack_install as cli_pack_install
from ongrid_skills.doors.cli import server as cli_server
from ongrid_skills.doors.cli import worker as cli_worker
from ongrid_skills.doors.cli.context import Context
from ongrid_skills.doors.cli.eventloop import run_until_done
from ongrid_skills.doors.cli.exits import (
    EXIT_FAILED,
    EXIT_USAGE,
    STATUS_EXIT,
)
from ongrid_skills.doors.cli.local_audit import LocalTrace
from ongrid_skills.doors.cli.options import GlobalGroup, add_anywhere
from ongrid_skills.doors.cli.refusal import fail
from ongrid_skills.errors import (
    ApprovalRequired,
    CredentialMissing,
    Denied,
    InvalidArgs,
    InvalidRequest,
    NotFound,
    SkillError,
)
from ongrid_skills.execution.pipeline import execute
from ongrid_skills.execution.records import Event
from ongrid_skills.governance.principal import local_user
from ongrid_skills.settings import Settings
from ongrid_skills.skills import lint as validate
from ongrid_skills.skills import scaffold
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import SkillClass

AUDIT = logging.getLogger("ongrid_skills.audit")


@click.group(cls=GlobalGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", type=click.Path(dir_okay=False), help="TOML settings file.")
@click.option(
    "-d",
    "--skills-dir",
    "skills_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Extra allow-listed skills root (after ONGRID_SKILLS_EXTERNAL_DIRS). Repeatable.",
)
@click.version_option(package_name="ongrid-skills")
@click.pass_context
def cli(ctx: click.Context, config: str | None, skills_dirs: tuple[str, ...]) -> None:
    """Skill manager for LLM agents doing operations work.

    --data-dir, -q and -v are accepted before or after the command."""
    ctx.ensure_object(Context).configure(config, skills_dirs, ctx.invoked_subcommand)


add_anywhere(cli)


@cli.command()
@click.argument("name", shell_complete=completion.skill_names)
@click.argument(
    "words",
    nargs=-1,
    metavar="[ARGS_JSON | - | KEY=VALUE ...]",
    shell_complete=completion.arg_words,
)
@click.option(
    "--persona",
    help="Run as this persona: its permission mode applies.",
    shell_complete=completion.persona_names,
)
@click.option("--yes", "-y", is_flag=True, help="The human confirmation a mutating skill needs.")
@click.option(
    "--i-know-it-is-dangerous",
    "dangerous",
    is_flag=True,
    help="With --yes: run a dangerous skill locally without a second signer (logged).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the whole Execution as JSON.")
@click.option(
    "--raw",
    "raw_result",
    is_flag=True,
    help="Print the result as the skill wrote it, also on a terminal (where it is "
    "pretty-printed otherwise); in a pipe it always is.",
)
@remote_run.wait_option
@target.options
@click.pass_obj
def run(
    obj: Context,
    name: str,
    words: tuple[str, ...],
    persona: str | None,
    yes: bool,
    dangerous: bool,
    as_json: bool,
    raw_result: bool,
    wait: bool,
) -> None:
    """Run a skill, here or on a server. The args: one JSON object, '-' (read from stdin), or
    KEY=VALUE pairs typed from the skill's schema (KEY:=JSON for a JSON value; repeat a key
    for an array). Here, or on the server of ONGRID_URL (see --local, --server)."""
    where = target.choose()
    if where.url is not None:
        remote_run.run(
            target=where,
            name=name,
            words=words,
            persona=persona,
            confirm=yes,
            as_json=as_json,
            raw=raw_result,
            wait=wait,
            dangerous=dangerous,
            stdin=sys.stdin,
        )
    if wait:
        fail(
            InvalidRequest("--wait is for runs on a server (--server, --url or ONGRID_URL)"),
            as_json=as_json,
        )
    try:
        json_text, pairs = cli_args.split(words)
        args = cli_args.parse_json(sys.stdin.read() if json_text == "-" else json_text or "")
    except InvalidRequest as exc:
        fail(exc, as_json=as_json)
    registry = obj.registry()
    if pairs:
        try:
            args = cli_args.from_pairs(pairs, registry.get(name).schema, name)
        except SkillError as exc:
            fail(exc, as_json=as_json)
    reach = obj.reach()
    if dangerous:
        AUDIT.warning(
            "run %s with --i-know-it-is-dangerous by %s (pid %d)",
            name,
            local_user(),
            os.getpid(),
        )
    trace = LocalTrace(obj, registry.skills.get(name), args, persona, dangerous)
    found = registry.skills.get(name)
    grants = cli_credentials.local_store(obj) if found is not None and found.credentials else None
    try:
        with output.RunView(name) as view:

            def on_event(event: Event) -> None:
                trace.event(event)  # before the skill starts: its start is recorded first
                if not as_json:
                    view.event(event)

            execution = run_until_done(
                execute(
                    registry,
                    name,
                    args,
                    confirm=yes,
                    persona=persona,
                    on_event=on_event,
                    allow_dangerous=dangerous,
                    requested_by=f"cli:{local_user()}",
                    reach=reach,
                    grants=grants,
                )
            )
    except KeyboardInterrupt:
        trace.finish(None, "interrupted")
        raise
    except ApprovalRequired as exc:
        hint = _confirmation_hint(registry, name)
        needed = exc.signatures_required
        fail(
            ApprovalRequired(f"{exc.message}: {hint}", signatures_required=needed), as_json=as_json
        )
    except (Denied, InvalidArgs, NotFound, CredentialMissing) as exc:
        fail(exc, as_json=as_json)
    trace.finish(execution)
    output.print_execution(execution, as_json=as_json, raw=raw_result)
    sys.exit(STATUS_EXIT.get(execution.status, EXIT_FAILED))


def _confirmation_hint(registry: Registry, name: str) -> str:
    if registry.get(name).skill_class is SkillClass.DANGEROUS:
        return "pass --yes --i-know-it-is-dangerous to run it locally, or request it on a server"
    return "pass --yes to confirm"


@cli.command("validate")
@click.argument("paths", nargs=-1, type=click.Path())
@click.pass_obj
def validate_cmd(obj: Context, paths: tuple[str, ...]) -> None:
    """Lint skill.json and persona files: path:line:col: error|warning: message."""
    targets = list(paths)
    if not targets:
        settings = obj.settings()
        targets = [*settings.external_dirs, *settings.persona_dirs, *obj.skills_dirs]
    if not targets:
        click.echo("ongrid-skills: nothing to validate (give PATHs or set the dirs)", err=True)
        sys.exit(EXIT_USAGE)
    try:
        persona_dirs = Settings.load(config=obj.config).persona_dirs
    except SkillError:
        persona_dirs = ()
    findings = validate.validate_paths(targets, persona_dirs)
    for finding in findings:
        click.echo(finding.format())
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    click.echo(f"{errors} error(s), {warnings} warning(s)", err=True)
    sys.exit(1 if errors else 0)


@cli.command()
@click.argument("name")
@click.option(
    "--lang",
    type=click.Choice(["sh", "python"]),
    default="sh",
    show_default=True,
    help="The language of the executable it writes.",
)
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where to create the skill folder.",
)
def new(name: str, lang: str, parent: str) -> None:
    """Scaffold a working skill folder: manifest, executable, test args."""
    try:
        folder = scaffold.create(name, lang, parent)
    except SkillError as exc:
        fail(exc)
    click.echo(folder)
    parent_dir, args_file = (
        shlex.quote(os.path.dirname(folder)),
        shlex.quote(f"{folder}/test-args.json"),
    )
    click.echo(f"try: {command_name()} -d {parent_dir} run {name} - < {args_file}", err=True)


def command_name() -> str:
    """How a hint calls this command again: ``ongrid-skills`` when the shell finds this very
    script by that name, else the path it was started by (``.venv/bin/ongrid-skills``)."""
    started = sys.argv[0]
    found = shutil.which("ongrid-skills")
    if os.sep not in started or (found and os.path.samefile(found, started)):
        return "ongrid-skills"
    return shlex.quote(started)


catalogue.register(cli)
cli_server.register(cli)
cli_mcp.register(cli)
cli_agent.register(cli)
cli_pack_install.register(cli_pack.register(cli))
cli_config.register(cli)
cli_worker.register(cli)
cli_credentials.register(cli)
cli_automation.register(cli)


def main(argv: list[str] | None = None) -> Any:
    """The ``ongrid-skills`` console script (``argv`` defaults to the process's arguments).

    Once the command is done, what is left on the heap (the modules, a server's app) is frozen
    (``gc.freeze``): the interpreter's exit then frees it without the collector's last passes
    over it, which took 0.3 s for ``serve`` on an idle machine, and seconds on a loaded one,
    between "stopped" and the process's end (a supervisor restarting it waited that long).
    """
    try:
        return cli.main(args=argv, prog_name="ongrid-skills")
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
