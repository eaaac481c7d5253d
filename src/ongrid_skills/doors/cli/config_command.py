"""``ongrid-skills config``: the effective settings, and where each came from.

One row per setting: its value, its source (``flag --data-dir``, ``env ONGRID_…``, ``file
/abs/ongrid.toml`` or ``default``) and the variable that sets it; then the skill config keys of
the ``[config]`` table, and the store the commands would use (the absolute data dir, the
database URL, whether a store is there). An aligned table for people, ``--json`` for scripts.
Secrets are never printed: the LLM API key, a database URL's password, skill config keys whose
name says key, token, secret or password.

It reads the settings only; it never creates the data dir nor opens the store.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from typing import Any

import click

from ongrid_skills.doors.cli.context import MASK, Context, is_secret, mask_url
from ongrid_skills.settings import Origin, Settings, env_var

#: Settings whose values are never printed.
SECRETS = frozenset({"llm_api_key"})
#: Settings that are not ``ONGRID_*`` values (the file itself, the skill config keys).
NOT_SETTINGS = frozenset({"config", "config_file"})


def register(cli: click.Group) -> None:
    """Add ``config`` to the ``ongrid-skills`` command group."""
    cli.add_command(config_command)


@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="The settings as one JSON object.")
@click.pass_obj
def config_command(obj: Context, as_json: bool) -> None:
    """Show the effective settings and where each came from (flag, env, config file, default).

    Secrets are masked. Exit 2 when a setting is invalid (the message names it)."""
    settings, trace = obj.traced()
    rows = [
        _row(spec.name, settings, trace.origin(spec.name))
        for spec in fields(Settings)
        if spec.name not in NOT_SETTINGS
    ]
    rows += _skill_config_rows(settings)
    spot = obj.spot()
    problem = spot.problem()
    store = {
        "data_dir": spot.data_dir,
        "database": spot.database,
        "state": "present" if problem is None else "missing" if problem == "missing" else "error",
        "problem": problem if problem not in (None, "missing") else None,
    }
    for key in trace.ignored:
        click.echo(
            f"ongrid-skills: warning: {settings.config_file}: {key!r} is not a setting (ignored)",
            err=True,
        )
    if as_json:
        body = {
            "settings": rows,
            "config_file": settings.config_file,
            "ignored": trace.ignored,
            "store": store,
        }
        click.echo(json.dumps(body, ensure_ascii=False))
        return
    table = [("SETTING", "VALUE", "SOURCE")]
    table += [(row["name"], _shown(row["value"]), _source(row)) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(2)]
    for name, value, source in table:
        click.echo(f"{name:<{widths[0]}}  {value:<{widths[1]}}  {source}".rstrip())
    state = store["state"] if store["problem"] is None else f"error: {store['problem']}"
    click.echo(f"\nstore: {spot.data_dir} ({state}), database {spot.database}")


def _row(name: str, settings: Settings, origin: Origin) -> dict[str, Any]:
    value = getattr(settings, name)
    if name in SECRETS and value:
        value = MASK
    elif name == "database_url" and value:
        value = mask_url(value)
    elif isinstance(value, tuple):
        value = list(value)
    return {
        "name": name,
        "value": value,
        "source": origin.kind,
        "where": origin.where,
        "env": env_var(name),
    }


def _skill_config_rows(settings: Settings) -> list[dict[str, Any]]:
    """The skill config keys of the file's ``[config]`` table (an ``ONGRID_…`` variable of the
    same key wins over it)."""
    rows = []
    for key in sorted(settings.config):
        variable = "ONGRID_" + key.upper().replace(".", "_").replace("-", "_")
        from_env = variable in os.environ
        value = settings.config[key]
        rows.append(
            {
                "name": f"config.{key}",
                "value": MASK if is_secret(key) else value,
                "source": "env" if from_env else "file",
                "where": variable if from_env else settings.config_file,
                "env": variable,
            }
        )
    return rows


def _shown(value: Any) -> str:
    if value is None or value == []:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _source(row: dict[str, Any]) -> str:
    if row["source"] == "default":
        return f"default (set with {row['env']})"
    return f"{row['source']} {row['where']}"
