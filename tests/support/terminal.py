"""The CLI in a pseudo-terminal: what an operator sees at a real terminal of a fixed size.

``in_terminal`` runs the console script under a PTY (pexpect) with a fixed width and a clean
environment, waits for it to end within a deadline and returns everything it wrote (stdout and
stderr share the terminal, as they do for a person) with its exit status. ``spawn`` hands back
the live child for tests that act while it runs (touch a gate file once a bar shows).
``piped`` runs it with both streams on pipes, as a script would, and keeps the exact bytes.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

import pexpect

from tests.support.processes import CLI

WIDTH, HEIGHT = 100, 40
#: Any escape sequence a terminal program writes: CSI (colours, cursor moves), OSC, two-byte.
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
#: Select Graphic Rendition sequences that set a colour (30-37, 90-97, 38;…, 40-47, 100-107).
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|4[0-8]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")


@dataclass(frozen=True)
class Screen:
    """What the terminal received (escape sequences included) and how the command ended."""

    raw: str
    status: int | None
    signal: int | None

    @property
    def text(self) -> str:
        """The words on screen: no escape sequences, ``\\r\\n`` as ``\\n``."""
        return ANSI.sub("", self.raw).replace("\r\n", "\n")


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A terminal's environment: TERM set, no ONGRID_* of the caller, no bundled skills."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "ONGRID_BUNDLED_SKILLS": "0",
    }
    env.update(extra or {})
    return env


def spawn(
    *args: str, env: Mapping[str, str] | None = None, width: int = WIDTH, timeout: float = 30
) -> pexpect.spawn:
    """Start ``ongrid-skills ARGS`` on a fresh PTY of ``width`` columns."""
    child = pexpect.spawn(
        CLI,
        list(args),
        env=environment(env),
        dimensions=(HEIGHT, width),
        encoding="utf-8",
        codec_errors="replace",
        timeout=timeout,
    )
    child.logfile_read = io.StringIO()  # everything it wrote, whatever the tests expect()ed
    return child


def finish(child: pexpect.spawn, timeout: float = 30) -> Screen:
    """Read until the child closes the terminal (at most ``timeout`` s), reap it, report."""
    child.expect(pexpect.EOF, timeout=timeout)
    child.close()
    raw = child.logfile_read.getvalue()
    return Screen(raw=raw, status=child.exitstatus, signal=child.signalstatus)


def in_terminal(
    *args: str, env: Mapping[str, str] | None = None, width: int = WIDTH, timeout: float = 30
) -> Screen:
    """Run ``ongrid-skills ARGS`` in a terminal to its end; what it wrote and its status."""
    return finish(spawn(*args, env=env, width=width, timeout=timeout), timeout)


def piped(
    *args: str, env: Mapping[str, str] | None = None, stdin: bytes = b"", timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    """Run ``ongrid-skills ARGS`` with stdout and stderr on pipes; the exact bytes of both."""
    return subprocess.run(
        [CLI, *args], input=stdin, capture_output=True, env=environment(env), timeout=timeout
    )
