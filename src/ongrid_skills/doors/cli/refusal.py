"""How a local command refuses: a :class:`~ongrid_skills.errors.SkillError` raised before anything
runs becomes its message on stderr (and ``{"error": …}`` on stdout with ``--json``) and the
exit code of its error code (:data:`ERROR_EXIT`; 1 for a code not listed)."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import click

from ongrid_skills.doors.cli.exits import EXIT_DENIED, EXIT_FAILED, EXIT_USAGE
from ongrid_skills.errors import SkillError

#: Error codes → exit codes, for errors raised before anything runs.
ERROR_EXIT = {
    "invalid_args": EXIT_USAGE,
    "invalid_request": EXIT_USAGE,
    "invalid_config": EXIT_USAGE,
    "invalid_manifest": EXIT_USAGE,
    "not_found": EXIT_USAGE,
    "denied": EXIT_DENIED,
    "approval_required": EXIT_DENIED,
    "credential_missing": EXIT_DENIED,
}


def fail(exc: SkillError, *, as_json: bool = False) -> NoReturn:
    """Report ``exc`` (also as JSON on stdout with ``as_json``) and exit with its code's status."""
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}))
    click.echo(f"ongrid-skills: {exc.message}", err=True)
    sys.exit(ERROR_EXIT.get(exc.code, EXIT_FAILED))
