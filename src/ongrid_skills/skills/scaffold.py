"""``ongrid-skills new``: a skill folder that runs and validates as soon as it is written.

It must never overwrite anything: an existing folder of that name is refused.
"""

from __future__ import annotations

import json
import os

from ongrid_skills.errors import InvalidRequest
from ongrid_skills.skills.skill_json import MAX_NAME_LENGTH, NAME_RE

_SH = """#!/bin/sh
# {name}: reads the args JSON on stdin, writes one JSON value on stdout, logs on stderr.
set -eu
args=$(cat)
echo "{name}: received ${{#args}} bytes of args" >&2
# Replace with the real work. Keep stdout for the result only.
printf '{{"ok": true, "args_bytes": %d}}\\n' "${{#args}}"
"""

_PY = '''#!/usr/bin/env python3
"""{name}: reads the args JSON on stdin, writes one JSON value on stdout, logs on stderr."""

import json
import sys


def main() -> int:
    args = json.load(sys.stdin)
    who = args.get("name", "world")
    print(f"{name}: greeting {{who}}", file=sys.stderr)
    json.dump({{"greeting": f"hello {{who}}"}}, sys.stdout)
    sys.stdout.write("\\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def create(name: str, lang: str, parent: str) -> str:
    """Write ``parent/<name>/`` with skill.json, the executable and test-args.json."""
    if not NAME_RE.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise InvalidRequest(f'name "{name}" must match [a-z0-9_]+ (at most 64 characters)')
    folder = os.path.abspath(os.path.join(parent, name))
    if os.path.exists(folder):
        raise InvalidRequest(f"{folder} already exists")
    entry = "run.sh" if lang == "sh" else "run.py"
    manifest = {
        "name": name,
        "description": f"{name}: describe what it does, for humans and for the model.",
        "schema": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet."}},
            "additionalProperties": False,
        },
        "entry": entry,
        "env_allow": ["PATH"],
        "timeout_seconds": 30,
        "class": "safe",
        "category": "custom",
    }
    os.makedirs(folder)
    with open(os.path.join(folder, "skill.json"), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    script = (_SH if lang == "sh" else _PY).format(name=name)
    path = os.path.join(folder, entry)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(script)
    os.chmod(path, 0o755)  # noqa: S103 - a skill entry must be executable
    with open(os.path.join(folder, "test-args.json"), "w", encoding="utf-8") as fh:
        fh.write('{"name": "ops"}\n')
    return folder
