"""``ongrid-skills pack install|list|show|remove|rollback|upgrade|search|outdated|index build``.

These work on the data dir (``ONGRID_DATA_DIR``), with the server running or not, like
``token create``: the change is one switch of a link under ``packs/.active``, which a running
server watches and reloads on (its MCP clients get ``list_changed``). Exit codes are the
group's (see :mod:`ongrid_skills.doors.cli.pack`). Every change is audited as ``cli:<user>``.

This module parses options and prints; the work is :class:`ongrid_skills.packs.service.Packs`.
It must never decide trust, nor write under the data dir itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ongrid_skills.doors.cli.pack import fail, limits_of
from ongrid_skills.errors import SkillError
from ongrid_skills.governance.principal import local_user

if TYPE_CHECKING:
    from ongrid_skills.packs.install import Outcome
    from ongrid_skills.packs.service import Packs
    from ongrid_skills.store import Store


T = TypeVar("T")


def register(group: click.Group) -> None:
    """Add these commands to the ``pack`` group (:mod:`ongrid_skills.doors.cli.pack`)."""
    for command in (install, list_cmd, show, remove, rollback, upgrade, search, outdated, index):
        group.add_command(command)


def _actor() -> str:
    return f"cli:{local_user()}"


def _open(ctx: click.Context) -> tuple[Store, Packs]:
    """The store and the packs of the data dir (SQLAlchemy and the packs library load here)."""
    from ongrid_skills.runtime import open_packs  # noqa: PLC0415 - lazy: the server stack
    from ongrid_skills.store import open_store  # noqa: PLC0415

    settings = ctx.obj.settings()
    try:
        store = open_store(
            settings.data_dir,
            settings.database_url,
            audit_key_file=settings.audit_key_file,
            audit_sink=settings.audit_sink,
        )
    except Exception as exc:  # a broken data dir must say so, not trace back
        raise click.ClickException(f"cannot open the store in {settings.data_dir}: {exc}") from exc
    try:
        return store, open_packs(settings, store)
    except SkillError as exc:  # an unusable trusted-keys file
        store.close()
        fail(exc)


def _report(outcome: Outcome, as_json: bool) -> None:
    for warning in outcome.warnings:
        click.echo(warning, err=True)
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), indent=2))
        return
    record = outcome.record
    label = f"{outcome.pack_id}@{outcome.version}"
    if outcome.removed is False:  # a removal of a pack that is not active: idempotent
        click.echo(f"{outcome.pack_id}: nothing to remove")
    elif outcome.action == "unchanged":
        click.echo(f"{label} is already the active version: nothing changed")
    elif outcome.action == "remove":
        click.echo(f"removed {outcome.pack_id} (was {outcome.from_version})")
    elif outcome.action == "install":
        click.echo(f"installed {label}")
    else:
        verb = {"rollback": "rolled back"}.get(outcome.action, outcome.action + "d")
        click.echo(f"{verb} {outcome.pack_id} {outcome.from_version} → {outcome.version}")
    if record is not None and outcome.action != "remove":
        names = ", ".join(record.skills) or "none"
        click.echo(f"skills: {names}")
        if record.personas:
            click.echo(f"personas: {', '.join(record.personas)}")
        signer = f"{record.signer} ({record.trust})" if record.signer else "unsigned"
        click.echo(f"digest {record.digest}")
        click.echo(f"signer {signer}")


def _report_dry_run(view: dict[str, Any], as_json: bool) -> None:
    from ongrid_skills.packs.summary import summary_lines  # noqa: PLC0415 - lazy, as above

    for warning in view["warnings"]:
        click.echo(warning, err=True)
    if as_json:
        click.echo(json.dumps(view, indent=2))
        return
    for line in summary_lines(view["summary"]):
        click.echo(line)
    here = f"{view['id']} {view['installed']} is active" if view["installed"] else "not installed"
    click.echo(f"dry run: nothing changed ({here})")


def _run(ctx: click.Context, as_json: bool, work: Callable[[Packs], T]) -> T:
    store, packs = _open(ctx)
    try:
        return work(packs)
    except SkillError as exc:
        fail(exc, as_json=as_json)
    finally:
        store.close()


_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
_UNSIGNED = click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Install a remote pack that is unsigned or signed by a key that is not trusted.",
)


@click.command()
@click.argument("source")
@_UNSIGNED
@click.option(
    "--dry-run",
    is_flag=True,
    help="Fetch and check SOURCE and show what it brings (its capability summary); install "
    "nothing.",
)
@_JSON
@click.pass_context
def install(
    ctx: click.Context, source: str, allow_unsigned: bool, dry_run: bool, as_json: bool
) -> None:
    """Install SOURCE and make it the active version of its pack.

    SOURCE is a pack folder (a pack, a Claude Code or openclaw plugin, a skills folder) or a
    .tar.gz/.tar/.zip archive (a path must look like one: ./ops, /srv/ops, ~/ops, or an
    archive's name), an https:// URL of an archive, a git source (git+URL, URL.git,
    git@host:path, each with an optional @REF; owner/repo[@REF] when ONGRID_PACK_GIT_FORGE
    names a forge), or a pack id ID or
    ID@VERSION of the marketplace indexes (ONGRID_PACK_INDEXES): any other word is an id. A
    remote pack must be signed by a key of ONGRID_TRUSTED_PACK_KEYS unless --allow-unsigned;
    an unpinned ID never installs a version older than the active one. --dry-run runs every
    check of an install and prints what the pack brings, changing nothing.
    """
    if dry_run:
        view = _run(ctx, as_json, lambda p: p.dry_run(source, allow_unsigned=allow_unsigned))
        _report_dry_run(view, as_json)
        return
    outcome = _run(
        ctx, as_json, lambda p: p.install(source, _actor(), allow_unsigned=allow_unsigned)
    )
    _report(outcome, as_json)


@click.command()
@click.argument("pack_id", metavar="ID")
@_UNSIGNED
@_JSON
@click.pass_context
def upgrade(ctx: click.Context, pack_id: str, allow_unsigned: bool, as_json: bool) -> None:
    """Install the newest version of ID the indexes offer, if newer than the active one."""
    outcome = _run(
        ctx, as_json, lambda p: p.upgrade(pack_id, _actor(), allow_unsigned=allow_unsigned)
    )
    _report(outcome, as_json)


@click.command()
@click.argument("pack_id", metavar="ID")
@_JSON
@click.pass_context
def rollback(ctx: click.Context, pack_id: str, as_json: bool) -> None:
    """Switch ID back to the version that was active before the current one."""
    _report(_run(ctx, as_json, lambda p: p.rollback(pack_id, _actor())), as_json)


@click.command()
@click.argument("pack_id", metavar="ID")
@_JSON
@click.pass_context
def remove(ctx: click.Context, pack_id: str, as_json: bool) -> None:
    """Withdraw every skill and persona of ID at once (files go once no call runs on them)."""
    _report(_run(ctx, as_json, lambda p: p.remove(pack_id, _actor())), as_json)


@click.command("list")
@_JSON
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """The installed packs: active version, trust, signer, skills."""
    views = _run(ctx, as_json, lambda p: p.installed())
    if as_json:
        click.echo(json.dumps(views, indent=2))
        return
    if not views:
        click.echo("no pack installed", err=True)
    for view in views:
        signer = view.get("signer") or "-"
        skills = ", ".join(view.get("skills") or []) or "-"
        pending = f"  (pending {view['pending']})" if view.get("pending") else ""
        click.echo(
            f"{view['id']:<24} {view['version']:<12} {view.get('trust') or '-':<9} "
            f"{signer:<51} {skills}{pending}"
        )


@click.command()
@click.argument("pack_id", metavar="ID")
@_JSON
@click.pass_context
def show(ctx: click.Context, pack_id: str, as_json: bool) -> None:
    """One installed pack: where it came from, its digest and signer, skills, versions kept."""
    view = _run(ctx, as_json, lambda p: p.show(pack_id))
    if as_json:
        click.echo(json.dumps(view, indent=2))
        return
    click.echo(f"{view['id']}@{view['version']}: {view.get('description') or ''}")
    for key in ("homepage", "source", "digest", "signer", "trust", "installed_by"):
        if view.get(key):
            click.echo(f"{key.replace('_', ' ')}: {view[key]}")
    click.echo(f"installed at: {view.get('installed_at')}")
    click.echo(f"skills: {', '.join(view.get('skills') or []) or '-'}")
    if view.get("personas"):
        click.echo(f"personas: {', '.join(view['personas'])}")
    click.echo(f"files: {view['path']}")
    for version in view["versions"]:
        click.echo(f"  {version['version']:<12} {version['state']:<9} {version['digest']}")


@click.command()
@click.argument("text", required=False, default="")
@_JSON
@click.pass_context
def search(ctx: click.Context, text: str, as_json: bool) -> None:
    """Packs of the marketplace indexes whose id or description holds TEXT."""
    found = _run(ctx, as_json, lambda p: p.available(text))
    for problem in found["problems"]:
        click.echo(f"warning: {problem}", err=True)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found["items"]:
        click.echo("no pack found", err=True)
    for item in found["items"]:
        here = f" (installed {item['installed']})" if item["installed"] else ""
        click.echo(f"{item['id']:<24} {item['newest']:<12} {item['description']}{here}")


@click.command()
@_JSON
@click.pass_context
def outdated(ctx: click.Context, as_json: bool) -> None:
    """Installed packs the indexes offer a newer version of."""
    found = _run(ctx, as_json, lambda p: p.outdated())
    for problem in found["problems"]:
        click.echo(f"warning: {problem}", err=True)
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found["items"]:
        click.echo("every installed pack is up to date", err=True)
    for item in found["items"]:
        click.echo(f"{item['id']:<24} {item['installed']} → {item['newest']}")


@click.group()
def index() -> None:
    """Marketplace indexes: index.json files that list packs (host them as static files)."""


@index.command("build")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--base-url", help="Prefix of every source (default: the archives' own names).")
@click.pass_context
def index_build(ctx: click.Context, folder: Path, base_url: str | None) -> None:
    """Write FOLDER/index.json for the pack archives in FOLDER, with digests and signers."""
    from ongrid_skills.packs.index import build_index  # noqa: PLC0415

    try:
        written = build_index(folder, limits_of(ctx), base_url=base_url)
    except SkillError as exc:
        fail(exc)
    body = json.loads(written.read_text())
    versions = sum(len(p["versions"]) for p in body["packs"])
    packs = len(body["packs"])
    click.echo(f"wrote {written} ({_count(packs, 'pack')}, {_count(versions, 'version')})")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
