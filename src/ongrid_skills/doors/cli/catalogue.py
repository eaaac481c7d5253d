"""``list``, ``show`` and ``tools``: the catalogue, of this machine or of a server.

Where each goes is :mod:`ongrid_skills.doors.cli.target`'s rule, the same as ``run``'s. Here, the
skills are loaded from the configured dirs and ``-d``; on a server they are read from its REST
API (``GET /v1/skills``, ``GET /v1/skills/{name}``, ``GET /v1/personas/{name}/tools``) and shown
the same way: the same table, view and JSON (``--json`` prints the server's body as it came).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import click

from ongrid_skills import toolspec
from ongrid_skills.doors.cli import completion, output, target
from ongrid_skills.doors.cli.context import Context
from ongrid_skills.doors.cli.refusal import fail
from ongrid_skills.doors.cli.remote import Remote
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.gate import offered
from ongrid_skills.types import SkillClass


def register(cli: click.Group) -> None:
    cli.add_command(list_cmd)
    cli.add_command(show)
    cli.add_command(tools)


def ask(where: target.Target, path: str, **params: str | None) -> tuple[Any, str]:
    """(body, text) of ``GET path`` on the target server (empty params left out); an error
    answer exits with its code, saying where it asked and how to look here instead."""
    remote = Remote(str(where.url), where.token, footnote=where.footnote)
    return remote.call_text("GET", path, params={k: v for k, v in params.items() if v})


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/skills.")
@output.output_option
@click.option("--category", help="Only this category.")
@click.option(
    "--class",
    "skill_class",
    type=click.Choice([c.value for c in SkillClass]),
    help="Only this class.",
)
@click.option(
    "--persona", help="Only what this persona may run.", shell_complete=completion.persona_names
)
@target.options
@click.pass_obj
def list_cmd(
    obj: Context,
    as_json: bool,
    output_format: str | None,
    category: str | None,
    skill_class: str | None,
    persona: str | None,
) -> None:
    """List the skills: here, or on the server of ONGRID_URL (see --local, --server)."""
    fmt = output.resolve(as_json, output_format)
    filtered = category or skill_class or persona
    where = target.choose()
    if where.url is not None:
        body, text = ask(
            where, "/v1/skills", category=category, persona=persona, **{"class": skill_class}
        )
        empty = "no skills match" if filtered else f"no skills on {where.url}"
    else:
        registry = obj.registry()
        try:
            who = registry.persona(persona) if persona else None
        except SkillError as exc:
            fail(exc, as_json=fmt == "json")
        items = registry.list(
            category=category or None,
            skill_class=SkillClass(skill_class) if skill_class else None,
            keep=(lambda s: offered(s, who)) if who else None,
        )
        body = {"items": [s.summary() for s in items], "total": len(items)}
        text = json.dumps(body, ensure_ascii=False)
        empty = "no skills match" if filtered else "no skills found (add a dir with -d DIR)"
    output.emit(
        fmt,
        data=body,
        json_text=text,
        table=lambda: output.skills_table(body["items"]),
        empty=empty,
    )


@click.command()
@click.argument("name", shell_complete=completion.skill_names)
@click.option("--json", "as_json", is_flag=True, help="Print the SkillSummary as JSON.")
@output.output_option
@target.options
@click.pass_obj
def show(obj: Context, name: str, as_json: bool, output_format: str | None) -> None:
    """Show one skill with its schema (NAME may be an alias: the name as written, pack:name)."""
    fmt = output.resolve(as_json, output_format)
    where = target.choose()
    if where.url is not None:
        summary, text = ask(where, f"/v1/skills/{quote(name, safe='')}")
        if fmt == "table":
            output.print_skill(summary)
            return
    else:
        registry = obj.registry()
        try:
            skill = registry.resolve(name)
        except SkillError as exc:
            fail(exc, as_json=fmt == "json")
        if fmt == "table":
            output.print_skill(skill)
            return
        summary = skill.summary()
        text = json.dumps(summary, ensure_ascii=False)
    if fmt == "json":
        click.echo(text)
    else:
        click.echo(output.to_yaml(summary), nl=False)


@click.command()
@click.option(
    "--persona",
    default="default",
    show_default=True,
    help="Whose view.",
    shell_complete=completion.persona_names,
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(list(toolspec.FORMATS)),
    default="openai",
    show_default=True,
    help="Whose tool format: OpenAI function tools, Anthropic tools or MCP tools.",
)
@click.option("-m", "--message", help="The user's message (activates keyword skills).")
@target.options
@click.pass_obj
def tools(obj: Context, persona: str, fmt: str, message: str | None) -> None:
    """Print the tool definitions the LLM would see, as JSON (here, or on a server)."""
    where = target.choose()
    if where.url is not None:
        path = f"/v1/personas/{quote(persona, safe='')}/tools"
        exported = ask(where, path, format=fmt, message=message)[0]["tools"]
    else:
        registry = obj.registry()
        try:
            who = registry.persona(persona)
        except SkillError as exc:
            fail(exc)
        exported = toolspec.export_all(toolspec.offered(registry, who, message), fmt)
    click.echo(json.dumps(exported, indent=2, ensure_ascii=False))
