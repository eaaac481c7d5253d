"""Where the CLI's output goes and how it may look: terminal or pipe, colour or not.

The one place that decides between human output (rich, on a terminal) and exact output (plain
text, in a pipe), and that makes text from skills, manifests and servers safe to print. It must
never import rich at module level: ``ongrid-skills --version`` and every command printing to a
pipe start without it (the start-up budget of SPEC §15).
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

#: C0 controls but tab and newline, DEL and the C1 controls (0x9b is a one-byte CSI on some
#: terminals). Text from a skill or a manifest may hold them: printed raw, an escape sequence
#: would recolour, retitle or rewrite the operator's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def is_terminal(stream: TextIO) -> bool:
    """True when ``stream`` is a terminal (a closed or replaced stream counts as a pipe)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def stdout_is_terminal() -> bool:
    return is_terminal(sys.stdout)


def stderr_is_terminal() -> bool:
    return is_terminal(sys.stderr)


def no_color() -> bool:
    """NO_COLOR (https://no-color.org): present and not empty turns every colour and style off."""
    return os.environ.get("NO_COLOR", "") != ""


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr), for a stream already known to be a terminal.

    Under NO_COLOR it has no colour system at all: rich then writes no style escape, bold
    included, only the text (a live progress display still moves the cursor)."""
    from rich.console import Console  # noqa: PLC0415 - lazy: see the module docstring

    stream = sys.stderr if stderr else sys.stdout
    return Console(
        file=stream,
        color_system=None if no_color() else "auto",
        highlight=False,
        emoji=False,
    )


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def one_line(text: str, limit: int | None = None) -> str:
    """``text`` on one printable line (whitespace runs become one space), cut to ``limit``."""
    line = printable(" ".join(text.split()))
    if limit is None or len(line) <= limit:
        return line
    return line[: limit - 1] + "…"
