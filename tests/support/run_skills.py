"""Skills for the console's run form and execution page, added to a served console.

- ``form_echo`` (safe): a schema with every kind of field the form generates (formats, enum,
  bounds, boolean, arrays, a nested object, JSON-only properties); it answers its args as it
  got them, so a test sees exactly what the form sent.
- ``failing_check`` (safe): says why on stderr and exits 3.
- ``free_echo`` (safe): a schema that names no property (any args), answered as given.
- ``stepped_check`` (safe): writes stderr lines and ``progress`` events in three steps, waiting
  for the files ``<gate>`` then ``<gate>.2`` between them: a run a browser watches live, at
  the pace of the test.

:func:`add_run_skills` writes them beside the console's own test skills and reloads.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.browser import Console
from tests.support.skills import write_skill

ECHO = "#!/bin/sh\ncat\n"
FORM_SCHEMA = {
    "type": "object",
    "properties": {
        "host": {"type": "string", "format": "hostname", "description": "Host to look at."},
        "address": {"type": "string", "format": "ipv4"},
        "when": {"type": "string", "format": "date-time"},
        "contact": {"type": "string", "format": "email"},
        "level": {"type": "string", "enum": ["low", "high"], "default": "low"},
        "retries": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "verbose": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}},
        "limits": {
            "type": "object",
            "properties": {"cpu": {"type": "number"}, "memory": {"type": "integer"}},
            "required": ["cpu"],
        },
        "extra": {"type": "object", "description": "Anything else, as JSON."},
    },
    "required": ["host"],
    "additionalProperties": False,
}
STEPPED = """#!/bin/sh
args=$(cat)
gate=$(printf '%s' "$args" | sed -n 's/.*"gate": *"\\([^"]*\\)".*/\\1/p')
echo 'checking the disks' >&2
echo '{"progress": 1, "total": 3, "message": "disks checked"}' >&2
while [ ! -e "$gate" ]; do /bin/sleep 0.01; done
echo 'checking the network' >&2
echo '{"progress": 2, "total": 3, "message": "network checked"}' >&2
while [ ! -e "$gate.2" ]; do /bin/sleep 0.01; done
echo '{"progress": 3, "total": 3}' >&2
echo '{"disks": "ok",  "network": "ok", "note": "<b>fine</b>"}'
"""
STEPPED_SCHEMA = {
    "type": "object",
    "properties": {"gate": {"type": "string", "description": "A file to wait for."}},
    "required": ["gate"],
}
#: What stepped_check answers, byte for byte (two spaces after the first comma).
STEPPED_RESULT = '{"disks": "ok",  "network": "ok", "note": "<b>fine</b>"}'
#: Says why on stderr, then fails with exit status 3.
FAILING = "#!/bin/sh\ncat >/dev/null\necho 'the disk is <on fire>' >&2\nexit 3\n"


def add_run_skills(console: Console) -> None:
    """Write the skills above into the console's skills and reload."""
    skills = Path(console.settings.external_dirs[-1])
    write_skill(skills, "form_echo", ECHO, schema=FORM_SCHEMA, category="testing")
    write_skill(skills, "failing_check", FAILING, category="testing")
    write_skill(skills, "free_echo", ECHO, schema={"type": "object"}, category="testing")
    write_skill(
        skills,
        "stepped_check",
        STEPPED,
        schema=STEPPED_SCHEMA,
        category="testing",
        timeout_seconds=60,
        description="Checks disks, then the network, saying so on stderr.",
    )
    response = console.rest("POST", "/v1/reload")
    assert response.status_code == 200, response.text
    assert {"form_echo", "failing_check", "stepped_check"} <= set(console.manager.registry.skills)
