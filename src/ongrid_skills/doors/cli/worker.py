"""``ongrid-skills worker`` (the edge worker on a target host) and ``ongrid-skills hosts`` (the
hosts a server sees; ``hosts key``: the public key workers must trust; ``worker --print-key``:
the line a manager's ONGRID_FLEET_WORKER_KEYS needs to trust this worker).

The worker command reads the settings (``ONGRID_NATS_URL`` and its credentials/NKey/TLS files,
``ONGRID_FLEET_MANAGER_KEYS``, the skill dirs of this host), loads this host's skills with the
same loader and log lines as ``serve``, and runs :class:`~ongrid_skills.fleet.worker.Worker`
until SIGTERM or SIGINT (a clean stop: running calls end ``interrupted``, the host leaves the
inventory at once). SIGHUP reloads the skills and announces them. The inventory is signed with
the worker's own key, ``data_dir/worker.key``, created on first use. The NATS client is imported
when the command runs, never at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
from typing import Any

import click

from ongrid_skills.doors.cli.eventloop import run_until_done
from ongrid_skills.doors.cli.remote import Remote, remote_options
from ongrid_skills.doors.cli.startup import starting
from ongrid_skills.errors import SkillError


def register(cli: click.Group) -> None:
    cli.add_command(worker)
    cli.add_command(hosts)


def _labels(pairs: tuple[str, ...]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or len(key) > 128 or len(value) > 256:
            raise click.BadParameter(f"{pair!r}: expected KEY=VALUE", param_hint="--label")
        labels[key] = value
    return labels


@click.command()
@click.option("--host-id", help="This host's id in the fleet (default: the hostname).")
@click.option(
    "--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="A label (repeatable)."
)
@click.option(
    "--print-key",
    is_flag=True,
    help="Print the line the managers' ONGRID_FLEET_WORKER_KEYS needs to trust this worker "
    "(its key is created on first use), and exit.",
)
@click.pass_context
def worker(
    ctx: click.Context, host_id: str | None, label_pairs: tuple[str, ...], print_key: bool
) -> None:
    """Run this host's host skills for the managers of the fleet (over NATS)."""
    from ongrid_skills.fleet.attest import key_line  # noqa: PLC0415 - lazy: see above
    from ongrid_skills.fleet.bus import host_id_problem  # noqa: PLC0415
    from ongrid_skills.packs.keys import load_trusted_keys  # noqa: PLC0415

    settings = ctx.obj.settings()
    host = host_id or socket.gethostname()
    problem = host_id_problem(host)
    if problem is not None:
        raise click.BadParameter(problem, param_hint="--host-id")
    if print_key:
        click.echo(key_line(host, _worker_key(settings)))
        return
    labels = _labels(label_pairs)
    if not settings.nats_url:
        raise click.UsageError("set ONGRID_NATS_URL: the NATS server of the fleet")
    if not settings.fleet_manager_keys:
        raise click.UsageError(
            "set ONGRID_FLEET_MANAGER_KEYS: a file of the managers' public keys "
            "(`ongrid-skills hosts key` prints a manager's)"
        )
    try:
        trusted = load_trusted_keys(settings.fleet_manager_keys, private="manager keys file")
    except SkillError as exc:
        raise click.UsageError(f"ONGRID_FLEET_MANAGER_KEYS: {exc.message}") from None
    if not len(trusted):
        raise click.UsageError(f"{settings.fleet_manager_keys} holds no key: nothing to obey")
    key = _worker_key(settings)
    dirs = (*settings.external_dirs, *ctx.obj.skills_dirs)
    settings = dataclasses.replace(settings, external_dirs=dirs)
    try:
        run_until_done(_work(settings, host, labels, trusted, key, ctx.obj.loader_line))
    except SkillError as exc:
        raise click.ClickException(exc.message) from None
    click.echo(f"ongrid-skills: worker {host} stopped")


def _worker_key(settings: Any) -> Any:
    """This worker's own signing key (``data_dir/worker.key``, created on first use)."""
    from ongrid_skills.fleet.attest import worker_key  # noqa: PLC0415

    try:
        return worker_key(settings)
    except SkillError as exc:
        raise click.ClickException(exc.message) from None


async def _work(
    settings: Any, host: str, labels: dict[str, str], trusted: Any, key: Any, sink: Any
) -> None:
    with starting():  # see doors.cli.startup
        from ongrid_skills.execution.confine import SandboxPolicy  # noqa: PLC0415
        from ongrid_skills.execution.runner import SubprocessRunner  # noqa: PLC0415
        from ongrid_skills.execution.supervision import (  # noqa: PLC0415
            groups_dir_of,
            kill_left_behind,
        )
        from ongrid_skills.fleet.nonces import Ledger  # noqa: PLC0415
        from ongrid_skills.fleet.worker import Worker  # noqa: PLC0415
        from ongrid_skills.runtime import registry_builder  # noqa: PLC0415
        from ongrid_skills.skills.registry import RegistryHolder  # noqa: PLC0415

    groups = groups_dir_of(settings.data_dir)
    await asyncio.to_thread(kill_left_behind, groups)  # a previous worker's calls, if it died
    holder = RegistryHolder(registry_builder(settings, sink))
    ledger = Ledger(settings.data_dir)
    runner = SubprocessRunner(groups_dir=groups, sandbox=SandboxPolicy.from_settings(settings))
    store, credentials = _credentials(settings)
    agent = Worker(
        settings, holder, trusted, runner, ledger, key, host=host, labels=labels,
        credentials=credentials,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, agent.stop)
    loop.add_signal_handler(signal.SIGHUP, agent.reload)
    click.echo(
        f"ongrid-skills: worker {host} for the fleet {settings.fleet_prefix!r} "
        f"(state in {settings.data_dir}; inventory signed with {key.fingerprint})",
        err=True,
    )
    try:
        await agent.run()
    finally:
        runner.close()
        ledger.close()
        if store is not None:
            store.close()


def _credentials(settings: Any) -> tuple[Any, Any]:
    """The host's own credential store (``ongrid-skills credentials …`` run against this data
    dir), when one was made: (store, credentials), else (None, None). Folders of calls cut by
    a crash are removed here."""
    from ongrid_skills.credentials.service import open_credentials  # noqa: PLC0415
    from ongrid_skills.store import open_store  # noqa: PLC0415

    if not os.path.exists(os.path.join(settings.data_dir, "ongrid.db")):
        return None, None
    store = open_store(settings.data_dir, None)  # this host's own, never a shared database
    credentials = open_credentials(settings, store.credentials)
    credentials.sweep()
    return store, credentials


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the body of GET /v1/hosts.")
@remote_options
@click.pass_context
def hosts(ctx: click.Context, as_json: bool, url: str, token: str | None) -> None:
    """The edge workers a server sees: online or offline, last heartbeat, labels, skills,
    running calls."""
    if ctx.invoked_subcommand is not None:
        return
    body = Remote(url, token).call("GET", "/v1/hosts")
    if as_json:
        click.echo(json.dumps(body))
        return
    if body.get("fleet") is None:
        click.echo("ongrid-skills: this server has no fleet (ONGRID_NATS_URL unset)", err=True)
        return
    for h in body["items"]:
        labels = ",".join(f"{k}={v}" for k, v in sorted(h["labels"].items())) or "-"
        state = "online" if h["online"] else "offline"
        if h.get("verified") is False:  # never offered: say why, on its line
            state = "UNVERIFIED"
            labels = f"{labels}  ({h.get('unverified')})"
        click.echo(
            f"{h['host']:<24} {state:<8} {h['last_heartbeat']}  skills={h['skill_count']:<3} "
            f"running={h['running_calls']:<3} v{h['version']}  {labels}"
        )


@hosts.command("key")
@click.pass_context
def hosts_key(ctx: click.Context) -> None:
    """Print the public key this manager signs its calls with (created on first use): put it
    in the workers' ONGRID_FLEET_MANAGER_KEYS file."""
    from ongrid_skills.fleet.signing import manager_key  # noqa: PLC0415

    settings = ctx.find_root().obj.settings()
    try:
        key = manager_key(settings)
    except SkillError as exc:
        raise click.ClickException(exc.message) from None
    with contextlib.suppress(OSError):
        click.echo(f"{key.public_line} ongrid-manager@{socket.gethostname()}")
