"""Server-side CLI commands on the local data dir: serve, token, audit. (The commands that talk
to a running server, ``approvals`` and ``executions``, are in
:mod:`ongrid_skills.doors.cli.remote_commands`.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

import click

from ongrid_skills.doors.cli import eventloop, output, remote_commands
from ongrid_skills.doors.cli.remote import fail as _fail
from ongrid_skills.doors.cli.startup import starting
from ongrid_skills.errors import SkillError
from ongrid_skills.execution.records import iso
from ongrid_skills.governance.principal import local_user
from ongrid_skills.types import Role

if TYPE_CHECKING:
    from ongrid_skills.store import Store
    from ongrid_skills.store.tokens import TokenInfo

# The server stack (FastAPI, uvicorn, SQLAlchemy, httpx) is imported by the commands that use
# it, not at start-up: `ongrid-skills list` and `run` stay fast.
#: Largest request head (request line + headers) the server reads; beyond it uvicorn answers 400.
#: uvicorn's httptools parser has no such bound of its own (a client could send megabytes of
#: headers): serve's protocol (serving.BoundedHttpTools) applies this one, given to uvicorn as
#: ``h11_max_incomplete_event_size``, the name of the same bound for its h11 parser.
MAX_REQUEST_HEAD_BYTES = 64 * 1024


def _store(ctx: click.Context, *, create: bool = False) -> Store:
    """The data dir's store; one that does not exist yet is created only with ``create``, else
    the command exits 2 naming the path it looked at (see Context.store_settings)."""
    store: Store = ctx.obj.open_store(create=create)
    return store


def register(cli: click.Group) -> None:
    cli.add_command(serve)
    cli.add_command(token)
    cli.add_command(audit)
    remote_commands.register(cli)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8731, show_default=True, type=int, help="TCP port to listen on.")
@click.option("--watch", is_flag=True, help="Reload when files under the dirs change.")
@click.option("--access-log", is_flag=True, help="Log every HTTP request.")
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, watch: bool, access_log: bool) -> None:
    """Serve the REST API, MCP over streamable HTTP (at /mcp) and the web console (at /)."""
    with starting():  # the server stack's imports, then the app: see doors.cli.startup
        import uvicorn  # noqa: PLC0415 - lazy: see above

        from ongrid_skills.doors.asgi import create_app  # noqa: PLC0415
        from ongrid_skills.doors.cli.serving import (  # noqa: PLC0415
            BoundedHttpTools,
            GracefulServer,
            proxy_options,
        )
        from ongrid_skills.runtime import bootstrap_admin_token  # noqa: PLC0415

    settings = ctx.obj.settings()
    loop = eventloop.chosen()  # a bad ONGRID_EVENT_LOOP stops us before anything is bound or made
    # Bind before announcing anything: "serving on" is said only once the socket is ours.
    try:
        sock = socket.create_server((host, port), family=_family(host), backlog=2048)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    store = _store(ctx, create=True)
    first = bootstrap_admin_token(store)
    url = f"http://{_shown(host)}:{port}"
    click.echo(
        f"ongrid-skills: serving on {url} (data in {settings.data_dir}); web console at {url}/"
    )
    if first:
        _announce_first_token(*first, settings.data_dir, url)
    sys.stdout.flush()
    with starting():
        app = create_app(settings, store=store, loader_sink=ctx.obj.loader_line, watch=watch)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=access_log,
        http=BoundedHttpTools,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        loop=loop,
        **proxy_options(settings.trusted_proxies),
    )
    server = GracefulServer(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        store.close()
    if server.stopped_by is not None:
        name = signal.Signals(server.stopped_by).name
        click.echo(f"ongrid-skills: stopped ({name}); calls in flight were recorded as interrupted")


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


#: Where the first-start admin token goes when stdout is not a terminal (mode 0600).
FIRST_TOKEN_FILE = "first-admin-token"  # noqa: S105 - a file name, not a secret


def _announce_first_token(secret: str, info: TokenInfo, data_dir: str, url: str) -> None:
    """Show the first-start admin token once, on a terminal only, with the console's login page.

    stdout that is not a terminal is a log (systemd's journal, ``docker logs``, a redirect): a
    token there is readable by whoever reads logs, ``read_journal`` included. Then the token goes
    to a 0600 file in the data dir (which built-ins never read) and only its id and a prefix are
    printed."""
    if sys.stdout.isatty():
        click.echo(
            "ongrid-skills: first start, admin token "
            f"(shown once, keep it; log in at {url}/login with it): {secret}"
        )
        return
    os.makedirs(data_dir, mode=0o700, exist_ok=True)  # a PostgreSQL store creates none
    path = os.path.join(data_dir, FIRST_TOKEN_FILE)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by an earlier first start: never write through it
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(secret + "\n")
    click.echo(
        f"ongrid-skills: first start, admin token {secret[:8]}… (id {info.id}) written to "
        f"{os.path.abspath(path)}: read it once, then delete the file "
        f"(a token is printed only on a terminal); log in at {url}/login with it"
    )


# ---- tokens (local data dir) ----------------------------------------------------------------
@click.group()
def token() -> None:
    """Create, list and revoke API tokens (works on the data dir, server running or not)."""


@token.command("create")
@click.option(
    "--role",
    type=click.Choice([r.value for r in Role]),
    required=True,
    help="viewer: read, run safe skills; operator: also request mutating/dangerous runs and "
    "sign approvals; admin: also packs, tokens, reload.",
)
@click.option(
    "--name",
    required=True,
    help="Who holds it (it signs approvals and audits): NFKC-normalised and case-folded, then "
    "1-64 of a-z 0-9 . _ @ -, unique, not a reserved name such as manager or watch.",
)
@click.option(
    "--init",
    is_flag=True,
    help="Create the data dir's store if there is none yet (an explicit --data-dir does too); "
    "without either, a missing store is an error (exit 2) naming the path looked at.",
)
@click.pass_context
def token_create(ctx: click.Context, role: str, name: str, init: bool) -> None:
    """Print only the new token on stdout."""
    store = _store(ctx, create=init or ctx.obj.data_dir_flag is not None)
    try:
        secret, _ = store.tokens.create(name, Role(role), actor=f"cli:{local_user()}")
    except SkillError as exc:
        _fail(exc.message)
    click.echo(secret)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the tokens as a JSON array.")
@output.output_option
@click.pass_context
def token_list(ctx: click.Context, as_json: bool, output_format: str | None) -> None:
    """List every token of the data dir (never its secret), revoked ones included."""
    fmt = output.resolve(as_json, output_format)
    rows = [t.to_dict() for t in _store(ctx).tokens.all()]
    output.emit(
        fmt,
        data=rows,
        json_text=json.dumps(rows),
        table=lambda: output.tokens_table(rows),
        empty="no tokens (create one: ongrid-skills token create --role R --name N)",
    )


@token.command("revoke")
@click.argument("ident")
@click.pass_context
def token_revoke(ctx: click.Context, ident: str) -> None:
    """Revoke a token by id or name."""
    if not _store(ctx).tokens.revoke(ident, actor=f"cli:{local_user()}"):
        _fail(f"no active token {ident!r}")
    click.echo(f"revoked {ident}", err=True)


# ---- audit (local data dir) ---------------------------------------------------------------
@click.group()
def audit() -> None:
    """The hash-chained audit log of the data dir."""


@audit.command("verify")
@click.option(
    "--against",
    "sinks",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="A copy of the audit sink (JSON lines or a syslog extract) to check the chain against.",
)
@click.pass_context
def audit_verify(ctx: click.Context, sinks: tuple[str, ...]) -> None:
    """Exit 1 when any entry was edited or deleted, the tail cut off or the chain wiped."""
    from ongrid_skills.store.auditsink import read_witnesses  # noqa: PLC0415 - lazy: see above

    store = _store(ctx)
    key_id = store.audit.sealer.key_id
    result = store.audit.verify(w for path in sinks for w in read_witnesses(path, key_id))
    for problem in result.problems:
        click.echo(f"audit: {problem}")
    for warning in result.warnings:
        click.echo(f"audit: warning: {warning}", err=True)
    click.echo(
        f"audit: {result.entries} entries, {'intact' if result.ok else 'TAMPERED'}", err=True
    )
    sys.exit(0 if result.ok else 1)


@audit.command("list")
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="How many of the latest entries.",
)
@click.option("--action", help="Only this action, e.g. approval.signed.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as a JSON array.")
@output.output_option
@click.pass_context
def audit_list(
    ctx: click.Context, limit: int, action: str | None, as_json: bool, output_format: str | None
) -> None:
    """List the latest entries of the audit chain."""
    fmt = output.resolve(as_json, output_format)
    entries = _store(ctx).audit.entries(limit=limit, action=action)
    output.emit(
        fmt,
        data=entries,
        json_text=json.dumps(entries, ensure_ascii=False),
        table=lambda: output.audit_table(entries, iso),
        empty=f"no audit entries for {action}" if action else "no audit entries",
    )
