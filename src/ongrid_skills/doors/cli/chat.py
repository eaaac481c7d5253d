"""``ongrid-skills chat``: the agent kernel in the terminal (SPEC §8, docs/agent.md).

Interactive by default (one conversation, a prompt per message); ``-m TEXT`` is the one-shot form
for scripts: the final answer on stdout (``--json``: the whole run with its transcript). The
terminal reads the run's typed events as every door does (``AgentService.follow``): the answer is
streamed from its ``text_delta`` events (interactive mode); tool calls, their stderr lines and
progress are shown live on stderr. When a human is at the terminal
(stdin is a tty), a call that needs one confirmation (mutating, or ``confirmation: required``)
is asked inline, ``[y/N]``, and a yes is that human's confirmation; otherwise — and always for
dangerous calls — the request goes to the approval inbox and the run waits for its decision.

Exit codes: 0 the model answered, 1 the run failed or hit max_turns, 2 usage (unknown persona,
no model configured), 130 interrupted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from ongrid_skills.doors.cli.eventloop import run_until_done
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.principal import Principal, local_user
from ongrid_skills.settings import LLM_PROVIDERS, Settings
from ongrid_skills.types import Role

if TYPE_CHECKING:
    from ongrid_skills.agent import AgentService, ChildEvent, RunEvent, RunRecord, ToolOutput
    from ongrid_skills.doors.cli.context import Context
    from ongrid_skills.skills.model import Skill

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_KEY_FALLBACK = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def register(cli: click.Group) -> None:
    """Add ``chat`` to the ``ongrid-skills`` command group."""
    cli.add_command(chat)


@click.command()
@click.option("--persona", default="default", show_default=True, help="The agent profile.")
@click.option("-m", "--message", help="One-shot: run this message to the end, print the answer.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole run and its transcript.")
@click.option("--model", help="The model (else the persona's, else ONGRID_LLM_MODEL).")
@click.option("--provider", type=click.Choice(list(LLM_PROVIDERS)), help="ONGRID_LLM_PROVIDER.")
@click.option("--base-url", help="ONGRID_LLM_BASE_URL, e.g. http://127.0.0.1:11434/v1.")
@click.pass_obj
def chat(
    obj: Any,
    persona: str,
    message: str | None,
    as_json: bool,
    model: str | None,
    provider: str | None,
    base_url: str | None,
) -> None:
    """Talk to the agent kernel: an LLM driving the skills of one persona."""
    # A configured data dir is created on first use; the default ./.ongrid is not.
    stored = obj.store_settings(create=obj.configured_data_dir())
    settings = _settings(stored, obj.skills_dirs, provider, base_url)
    view = Terminal(interactive=message is None)
    try:
        code = run_until_done(_chat(settings, obj, persona, message, model, as_json, view))
    except KeyboardInterrupt:
        click.echo("\nongrid-skills: interrupted", err=True)
        code = EXIT_INTERRUPTED
    sys.exit(code)


def _settings(
    settings: Settings, extra_dirs: tuple[str, ...], provider: str | None, base_url: str | None
) -> Settings:
    changes: dict[str, Any] = {"external_dirs": (*settings.external_dirs, *extra_dirs)}
    if base_url:
        changes["llm_base_url"] = base_url
    if provider and provider != settings.llm_provider:
        changes["llm_provider"] = provider
        changes["llm_api_key"] = os.environ.get("ONGRID_LLM_API_KEY") or os.environ.get(
            _KEY_FALLBACK[provider]
        )
    return dataclasses.replace(settings, **changes)


async def _chat(
    settings: Settings,
    obj: Context,
    persona: str,
    message: str | None,
    model: str | None,
    as_json: bool,
    view: Terminal,
) -> int:
    from ongrid_skills.agent import AgentService  # noqa: PLC0415 - the agent loads only for this command
    from ongrid_skills.runtime import open_manager  # noqa: PLC0415

    human = Principal(f"cli:{local_user()}", Role.OPERATOR)
    confirm = ask_at_terminal if sys.stdin.isatty() else None
    async with open_manager(settings, loader_sink=obj.loader_line, guest=True) as manager:
        obj.loaded(manager.registry)
        service = AgentService(manager)
        run_id: str | None = None

        async def say(text: str) -> RunRecord:
            """One message to the run (the first one starts it), its events shown as they come."""
            nonlocal run_id
            if run_id is None:
                run_id = service.start(persona, human, text, model=model, confirm=confirm).id
                after = 0
            else:
                after = service.runs.last_event_seq(run_id)
                service.send(run_id, text, human, confirm=confirm)
            return await follow(service, run_id, after, view)

        try:
            if message is not None:
                record = await say(message)
                return _report(record, service.body(record.id) if as_json else None, view)
            manager.registry.persona(persona)  # an unknown persona fails before the prompt
            last: RunRecord | None = None
            while True:
                text = await asyncio.to_thread(_prompt)
                if text is None or text.strip() in ("/exit", "/quit"):
                    break
                if not text.strip():
                    continue
                last = await say(text)
                view.end_of_answer(last)
            if run_id is not None and as_json:
                click.echo(json.dumps(service.body(run_id), ensure_ascii=False))
            return EXIT_OK if last is None or last.status.value == "done" else EXIT_FAILED
        except SkillError as exc:
            click.echo(f"ongrid-skills: {exc.message}", err=True)
            return EXIT_USAGE if exc.code in ("not_found", "invalid_request") else EXIT_FAILED
        finally:
            await service.close()  # Ctrl-C: the run is interrupted, its requests withdrawn


async def follow(service: AgentService, run_id: str, after: int, view: Terminal) -> RunRecord:
    """Show the run's events after number ``after`` until its ``done``; then the run."""
    async for _seq, event in service.follow(run_id, after):
        view.event(event)
    return await service.finished(run_id)


def _report(record: RunRecord, body: dict[str, Any] | None, view: Terminal) -> int:
    if body is not None:
        click.echo(json.dumps(body, ensure_ascii=False))
    elif record.final_answer:
        click.echo(record.final_answer)
    if record.status.value == "done":
        return EXIT_OK
    view.problem(record)
    return EXIT_FAILED


def _prompt() -> str | None:
    click.echo(click.style("you> ", bold=True), err=True, nl=False)
    line = sys.stdin.readline()
    return None if not line else line.rstrip("\n")


async def ask_at_terminal(skill: Skill, args: Any) -> bool:
    """The inline confirmation of the human at the terminal: yes runs it as their call."""
    shown = json.dumps(args, ensure_ascii=False)
    question = f"run {skill.skill_class.value} skill {skill.name} with args {shown}? [y/N] "

    def ask() -> bool:
        click.echo(click.style(question, fg="yellow", bold=True), err=True, nl=False)
        answer = sys.stdin.readline().strip().lower()
        return answer in ("y", "yes")

    return await asyncio.to_thread(ask)


class Terminal:
    """Renders a run's events on stderr as they happen; streams the answer when interactive."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive
        self.streamed = False

    def text(self, delta: str) -> None:
        """Stream a piece of the model's answer to stdout (interactive mode only)."""
        if self.interactive and delta:
            if not self.streamed:
                click.echo(click.style("agent> ", bold=True), nl=False)
            self.streamed = True
            click.echo(delta, nl=False)
            sys.stdout.flush()

    def _newline(self) -> None:
        if self.streamed:
            click.echo("")
            self.streamed = False

    def event(self, event: RunEvent) -> None:
        """Show one run event: the answer's text as it streams (stdout), tool calls, their
        stderr and progress, approvals (stderr)."""
        from ongrid_skills import agent as a  # noqa: PLC0415 - loaded by the command already

        if isinstance(event, a.ChildEvent):
            self.child(event)
        elif isinstance(event, a.TextDelta):
            self.text(event.text)
        elif isinstance(event, a.Said) and event.role == "assistant":
            self._newline()
        elif isinstance(event, a.ToolStarted):
            self._newline()
            args = event.args
            shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            click.echo(click.style(f"⚙ {event.tool} {_cut(shown, 300)}", fg="cyan"), err=True)
        elif isinstance(event, a.ToolOutput):
            self.output(event)
        elif isinstance(event, a.ApprovalPending):
            approval = event.approval_id
            click.echo(
                click.style(
                    f"⏸ {event.tool} waits for approval {approval} "
                    f"({event.signatures_required} signature(s)): "
                    f"ongrid-skills approvals approve {approval}",
                    fg="yellow",
                ),
                err=True,
            )
        elif isinstance(event, a.ToolEnded):
            if event.status == "succeeded":
                line = click.style(f"✓ {event.tool} ({event.duration_ms} ms) ", fg="green")
            else:
                line = click.style(f"✗ {event.tool} {event.status} ", fg="red")
            preview = click.style(_cut(event.content, 200), dim=True)
            click.echo(line + preview, err=True)

    def child(self, event: ChildEvent) -> None:
        """An event of a delegated run: on stderr, indented by its depth, its persona named
        (its text is not streamed: its answer is the ``delegate`` call's result)."""
        from ongrid_skills import agent as a  # noqa: PLC0415 - loaded by the command already

        inner, pad = event.event, "  " * event.depth
        head = f"{pad}↳ [{event.persona}] "
        line: str | None = None
        color = "cyan"
        if isinstance(inner, a.Said) and inner.role == "user":
            line = f"{head}task (run {event.run_id[:8]}): {_cut(inner.text, 300)}"
            color = "magenta"
        elif isinstance(inner, a.Said) and inner.role == "assistant" and inner.text:
            line, color = f"{head}says: {_cut(inner.text, 300)}", "white"
        elif isinstance(inner, a.ToolStarted):
            args = inner.args
            shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            line = f"{head}⚙ {inner.tool} {_cut(shown, 300)}"
        elif isinstance(inner, a.ToolOutput) and inner.kind == "stderr":
            line, color = f"{pad}  │ {inner.data.get('line', '')}", "white"
        elif isinstance(inner, a.ApprovalPending):
            line = (
                f"{head}⏸ {inner.tool} waits for approval {inner.approval_id} "
                f"({inner.signatures_required} signature(s)): "
                f"ongrid-skills approvals approve {inner.approval_id}"
            )
            color = "yellow"
        elif isinstance(inner, a.ToolEnded):
            mark = "✓" if inner.status == "succeeded" else "✗"
            color = "green" if inner.status == "succeeded" else "red"
            line = f"{head}{mark} {inner.tool} {inner.status} {_cut(inner.content, 200)}"
        elif isinstance(inner, a.RunDone):
            line, color = f"{head}run {event.run_id[:8]} ended {inner.status}", "magenta"
        if line is not None:
            self._newline()
            click.echo(click.style(line, fg=color, dim=color == "white"), err=True)

    def output(self, event: ToolOutput) -> None:
        """A running call's stderr line or progress report (a ``ToolOutput``), dimmed."""
        data = event.data
        if event.kind == "stderr":
            click.echo(click.style(f"  │ {data.get('line', '')}", dim=True), err=True)
        elif event.kind == "progress":
            total = data.get("total")
            amount = (
                f"{data.get('progress')}/{total}" if total is not None else data.get("progress")
            )
            line = f"  │ [progress {amount}] {data.get('message', '')}".rstrip()
            click.echo(click.style(line, dim=True), err=True)

    def end_of_answer(self, record: RunRecord) -> None:
        """End the streamed answer's line; say why when the run did not end ``done``."""
        self._newline()
        if record.status.value != "done":
            self.problem(record)

    def problem(self, record: RunRecord) -> None:
        """Print why a run did not end ``done``."""
        error = record.error
        why = f"{error.message}" if error else record.status.value
        click.echo(
            click.style(f"ongrid-skills: run {record.status.value}: {why}", fg="red"), err=True
        )


def _cut(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
