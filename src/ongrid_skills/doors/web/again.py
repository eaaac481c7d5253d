"""Doing a finished call again: the run form filled with its args (``/skills/{name}/run?again=
{execution id}``), and the same call as a command line to copy, for the CLI and for curl.

The copied text never holds a secret: the token is ``$ONGRID_TOKEN``, a variable the person
sets in their own shell (the console never sees a token after login anyway). The args are the
call's, as its page shows them (credentials never travel in args: SPEC §18). A call that needed
a confirmation is copied with it (``--yes``, ``"confirm": true``): pasting it is that
confirmation. A dangerous call is copied without: on a server it becomes an approval request
again. Pure functions of an execution and the server's URL.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ongrid_skills.skills.model import Skill
from ongrid_skills.types import SkillClass

#: What stands for the token in copied commands: a variable of the reader's own shell.
TOKEN_PLACEHOLDER = "$ONGRID_TOKEN"  # noqa: S105 - a variable's name, not a token


@dataclass(frozen=True, slots=True)
class Again:
    """How the execution page offers the call again."""

    form_url: str
    cli: str
    curl: str


def _confirms(skill: Skill) -> bool:
    return skill.skill_class is not SkillClass.DANGEROUS and (
        skill.skill_class is SkillClass.MUTATING or skill.confirmation_required
    )


def cli_command(base_url: str, skill: Skill, args: Any, persona: str | None) -> str:
    """``ongrid-skills run NAME ARGS_JSON --url URL`` (the token from ``ONGRID_TOKEN``)."""
    words = ["ongrid-skills", "run", skill.name, _json(args), "--url", base_url]
    if persona:
        words += ["--persona", persona]
    if _confirms(skill):
        words.append("--yes")
    return " ".join(shlex.quote(w) for w in words)


def curl_command(base_url: str, skill: Skill, args: Any, persona: str | None) -> str:
    """``curl`` posting the call to ``/v1/skills/NAME/execute``, the token as a variable."""
    body: dict[str, Any] = {"args": args}
    if persona:
        body["persona"] = persona
    if _confirms(skill):
        body["confirm"] = True
    url = f"{base_url}/v1/skills/{quote(skill.name, safe='')}/execute"
    return " \\\n  ".join(
        [
            f"curl -sS -X POST {shlex.quote(url)}",
            f'-H "Authorization: Bearer {TOKEN_PLACEHOLDER}"',
            "-H 'Content-Type: application/json'",
            f"--data {shlex.quote(_json(body))}",
        ]
    )


def again_of(
    base_url: str, execution_id: str, skill: Skill, args: Any, persona: str | None
) -> Again:
    base = base_url.rstrip("/")
    return Again(
        form_url=f"/skills/{quote(skill.name, safe='')}/run?again={quote(execution_id, safe='')}",
        cli=cli_command(base, skill, args, persona),
        curl=curl_command(base, skill, args, persona),
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
