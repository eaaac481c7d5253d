"""How a call ended: the :class:`RunOutcome` of a finished child, from what the runner saw.

The verdict of SPEC §4: a timeout wins, then an oversized stdout, then the exit status (unknown,
a signal, non-zero), and only a clean exit 0 has its stdout decoded as the result. It must never
touch a process or a pipe: the runner hands over the exit code, the flags and the buffers.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from ongrid_skills.execution.records import ErrorInfo, Status
from ongrid_skills.execution.wire import StdoutBuffer, decode_result


@dataclass(slots=True)
class RunOutcome:
    """How one call ended: its status and error, the verbatim result, exit code and stderr."""

    status: Status
    stdout: bytes = b""
    result: Any = None
    result_text: str | None = None
    error: ErrorInfo | None = None
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    orphans_killed: int = 0
    started_at: float | None = None
    duration_ms: float = 0.0


def verdict(
    code: int | None, timed_out: bool, timeout: float, out: StdoutBuffer, stderr_tail: str
) -> RunOutcome:
    """The outcome of a child reaped with return ``code`` (Popen's convention: negative = the
    signal that killed it; None = unknown)."""
    outcome = RunOutcome(Status.FAILED, stdout=out.masked(), stderr_tail=stderr_tail)
    if code is not None and code >= 0:
        outcome.exit_code = code
    elif code is not None:
        outcome.signal = signal_name(-code)
    if timed_out:
        outcome.status = Status.TIMED_OUT
        outcome.error = ErrorInfo("timed_out", f"timed out after {timeout:g} s")
    elif out.too_large:
        outcome.status = Status.OUTPUT_TOO_LARGE
        outcome.error = out.overflow()
    elif code is None:
        outcome.error = ErrorInfo("exit_status", "exit status unknown")
    elif code < 0:
        outcome.error = ErrorInfo("killed_by_signal", f"killed by signal {outcome.signal}")
    elif code > 0:
        outcome.error = ErrorInfo("exit_status", f"exit status {code}")
    else:
        decoded = decode_result(outcome.stdout, out.masker)
        if decoded.error is not None:
            outcome.error = decoded.error
        else:
            outcome.status = Status.SUCCEEDED
            outcome.result = decoded.value
            outcome.result_text = decoded.text
    return outcome


def signal_name(signum: int) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number without a name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


__all__ = ["RunOutcome", "signal_name", "verdict"]
