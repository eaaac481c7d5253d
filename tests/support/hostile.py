"""Hostile output for the console's escaping tests: a model's text and a skill's stdout that no
page may turn into markup, with control characters and a JSON document too big to show
unfolded."""

from __future__ import annotations

from pathlib import Path

from tests.support.skills import write_skill

#: A model's text no page may turn into markup, with a terminal escape and a bidi override.
HOSTILE_TEXT = '<img src=x onerror="alert(1)"><script>alert(2)</script>\x1b[31mred\u202eevil'
#: A skill that prints markup, an escaped control character and a huge JSON document.
HOSTILE_SKILL = """#!/bin/sh
cat >/dev/null
printf '%s' '{"html": "<b>bold</b><script>alert(3)</script>", "esc": "\\u001b[2J", "rows": ['
i=0
while [ $i -lt 400 ]; do printf '{"n": %d, "host": "web-%d"},' $i $i; i=$((i+1)); done
printf '{"n": -1}]}\\n'
"""


def write_hostile_skill(skills: Path) -> None:
    """``hostile_dump`` (safe): prints :data:`HOSTILE_SKILL`'s document."""
    write_skill(skills, "hostile_dump", HOSTILE_SKILL, description="Prints odd things.")
