"""``ongrid-skills credentials``: the credential store of the data dir (SPEC §18).

Values never come from the command line (argv is visible to every user of the host, and lands in
shell histories): ``--value FIELD`` reads the value from standard input (hidden when it is a
terminal), ``--value-file FIELD=PATH`` from a file, ``--json`` reads an object of field values
from standard input. ``--ref FIELD=file:PATH|env:NAME|command:NAME ARGS`` stores a reference
read at call time. Nothing here ever prints a value.
"""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ongrid_skills.doors.cli import output
from ongrid_skills.doors.cli.remote import fail as _fail
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.principal import local_user

if TYPE_CHECKING:
    from ongrid_skills.credentials.service import Credentials
    from ongrid_skills.doors.cli.context import Context
    from ongrid_skills.store import Store
    from ongrid_skills.store.credentials import CredentialInfo


F = TypeVar("F", bound=Callable[..., Any])


def register(cli: click.Group) -> None:
    cli.add_command(credentials)


def _service(ctx: click.Context) -> Credentials:
    store = ctx.obj.open_store(create=ctx.obj.data_dir_flag is not None)
    ctx.call_on_close(store.close)
    return _open(ctx.obj, store)


def _open(obj: Context, store: Store) -> Credentials:
    from ongrid_skills.credentials.service import open_credentials  # noqa: PLC0415 - lazy

    return open_credentials(obj.store_settings(), store.credentials)


def local_store(obj: Context) -> Credentials:
    """The data dir's credentials, for ``run`` of a skill with slots (the store stays open for
    the life of the command; a data dir without a store exits 2 naming the path)."""
    return _open(obj, obj.open_store())


def _actor() -> str:
    return f"cli:{local_user()}"


def _pairs(option: str, items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or not name or not rest:
            _fail(f"{option} takes FIELD=…, got {item!r}")
        out[name] = rest
    return out


def _values(fields: tuple[str, ...], files: tuple[str, ...], as_json: bool) -> dict[str, str]:
    """The values given on standard input or in files (never on the command line)."""
    values: dict[str, str] = {}
    if any("=" in name for name in fields):  # never echo it: it may be a value
        _fail("--value takes a FIELD name; the value is read from standard input, never argv")
    if as_json:
        try:
            given = json.loads(sys.stdin.read())
        except ValueError:
            _fail("--json: standard input is not a JSON object of field values")
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            _fail("--json: standard input must be a JSON object of field: string value")
        values.update(given)
    if fields:
        if as_json:
            _fail("--value and --json both read standard input: use one of them")
        if sys.stdin.isatty():
            for name in fields:
                values[name] = getpass.getpass(f"{name}: ")
        elif len(fields) == 1:
            values[fields[0]] = sys.stdin.read().removesuffix("\n")
        else:
            _fail("several --value fields need a terminal to ask for each; pipe them with --json")
    for name, path in _pairs("--value-file", files).items():
        try:
            with open(path, encoding="utf-8") as f:
                values[name] = f.read().removesuffix("\n")
        except (OSError, UnicodeDecodeError) as exc:
            _fail(f"--value-file {name}: cannot read {path}: {exc}")
    return values


_value_options = [
    click.option(
        "--value",
        "value_fields",
        multiple=True,
        metavar="FIELD",
        help="A field whose value is read from standard input (asked, hidden, on a terminal).",
    ),
    click.option(
        "--value-file",
        "value_files",
        multiple=True,
        metavar="FIELD=PATH",
        help="A field whose value is the content of a file (one trailing newline dropped).",
    ),
    click.option(
        "--ref",
        "refs",
        multiple=True,
        metavar="FIELD=REF",
        help="A field read at call time: file:/path, env:NAME or command:NAME [ARGS] "
        "(see docs/credentials.md).",
    ),
    click.option("--json", "as_json", is_flag=True, help="Read a JSON object of values on stdin."),
]


def _with_values(fn: F) -> F:
    for option in reversed(_value_options):
        fn = option(fn)
    return fn


@click.group()
def credentials() -> None:
    """Credentials that skills use and models never see (works on the data dir)."""


@credentials.command("create")
@click.argument("name")
@_with_values
@click.pass_context
def create(ctx: click.Context, /, name: str, **given: Any) -> None:
    """Create a credential; its values are sealed and never shown again."""
    info = _change(ctx, "create", name, **given)
    click.echo(f"created {info.name} ({', '.join(sorted(info.sources))})", err=True)


@credentials.command("rotate")
@click.argument("name")
@_with_values
@click.pass_context
def rotate(ctx: click.Context, /, name: str, **given: Any) -> None:
    """New values (or references) for some fields; the next call uses them."""
    _change(ctx, "rotate", name, **given)
    click.echo(f"rotated {name}", err=True)


def _change(
    ctx: click.Context,
    verb: str,
    name: str,
    *,
    value_fields: tuple[str, ...],
    value_files: tuple[str, ...],
    refs: tuple[str, ...],
    as_json: bool,
) -> CredentialInfo:
    """Create or rotate ``name`` with the values and references the options give."""
    values = _values(value_fields, value_files, as_json)
    service = _service(ctx)
    change = service.create if verb == "create" else service.rotate
    try:
        return change(name, values, _pairs("--ref", refs), _actor())
    except SkillError as exc:
        _fail(exc.message)


@credentials.command("delete")
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Delete a credential nothing is bound to."""
    try:
        _service(ctx).delete(name, _actor())
    except SkillError as exc:
        _fail(exc.message)
    click.echo(f"deleted {name}", err=True)


@credentials.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the credentials as a JSON array.")
@output.output_option
@click.pass_context
def list_(ctx: click.Context, as_json: bool, output_format: str | None) -> None:
    """Names, fields, bindings, who and when: never a value."""
    fmt = output.resolve(as_json, output_format)
    rows = [c.to_dict() for c in _service(ctx).all()]
    output.emit(
        fmt,
        data=rows,
        json_text=json.dumps(rows),
        table=lambda: output.credentials_table(rows),
        empty="no credentials (create one: ongrid-skills credentials create NAME --value FIELD)",
    )


def _target(skill: str | None, pack: str | None) -> None:
    if (skill is None) == (pack is None):
        _fail("name a skill (--skill) or a pack (--pack), one of them")


@credentials.command("bind")
@click.argument("credential")
@click.option("--slot", required=True, help="The slot the skill (or the pack's skills) declare.")
@click.option("--skill", help="Bind to this skill's slot.")
@click.option("--pack", help="Bind to this slot of every skill of the pack.")
@click.pass_context
def bind(
    ctx: click.Context, credential: str, slot: str, skill: str | None, pack: str | None
) -> None:
    """Bind a credential to a slot; pending approvals of the skill are void."""
    _target(skill, pack)
    try:
        found = ctx.obj.registry().get(skill) if skill is not None else None
        previous = _service(ctx).bind(credential, slot, _actor(), skill=found, pack=pack)
    except SkillError as exc:
        _fail(exc.message)
    where = f"skill {skill}" if skill is not None else f"pack {pack}"
    replaced = f" (was {previous.credential})" if previous is not None else ""
    click.echo(f"bound {credential} to slot {slot} of {where}{replaced}", err=True)


@credentials.command("unbind")
@click.option("--slot", required=True, help="The slot to leave without a credential.")
@click.option("--skill", help="Unbind this skill's own binding of the slot.")
@click.option("--pack", help="Unbind the pack's binding of the slot.")
@click.pass_context
def unbind(ctx: click.Context, slot: str, skill: str | None, pack: str | None) -> None:
    """Unbind a slot: the skill is unavailable until something is bound again."""
    _target(skill, pack)
    try:
        previous = _service(ctx).unbind(slot, _actor(), skill=skill, pack=pack)
    except SkillError as exc:
        _fail(exc.message)
    click.echo(f"unbound {previous.credential} from slot {slot}", err=True)
