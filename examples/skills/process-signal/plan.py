#!/usr/bin/env python3
"""process_signal's preview: which process would get which signal, with nothing sent.

Same wire protocol and the same argument checks as run.py (imported from it), then it reads the
target from /proc and prints what the real call would do:

    {"pid": 4242, "signal": "TERM"}
    -> {"would_send": "SIGTERM", "pid": 4242, "name": "nginx", "cmdline": "nginx: master ...",
        "user": 33, "exists": true}

A pid that is gone or refused (init, this skill's ancestors) is said so in the result, still
exit 0: the signers see why the real call would fail before they sign.
"""

from __future__ import annotations

import json
import os
import sys

sys.dont_write_bytecode = True  # the skill's folder stays as shipped (no __pycache__)
from run import ancestors, parse_args, process_name, read_args  # noqa: E402

CMDLINE_CHARS = 300


def cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(CMDLINE_CHARS * 4)
    except OSError:
        return None
    text = raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()
    return text[:CMDLINE_CHARS]


def owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def main() -> None:
    pid, name = parse_args(read_args())
    plan: dict[str, object] = {"would_send": f"SIG{name}", "pid": pid}
    if pid == os.getpid() or pid in ancestors():
        plan["refused"] = "it is the skill itself or an ancestor (the manager or above)"
    process = process_name(pid)
    plan.update(
        exists=process is not None, name=process, cmdline=cmdline(pid), user=owner(pid)
    )
    json.dump(plan, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
