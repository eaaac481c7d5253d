"""Waiting for a child and reaping it (Linux pidfds where there are, ``waitpid`` else).

Split from :mod:`ongrid_skills.execution.spawner`, which re-exports these names.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable


def exits_within(pidfd: int, seconds: float | None) -> bool:
    """Wait at most ``seconds`` (None: for as long as it takes) for the process behind
    ``pidfd`` to exit."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(None if seconds is None else seconds * 1000))


def after_exit(pidfd: int, then: Callable[[], object]) -> None:
    """Call ``then`` in a thread of its own once the process behind ``pidfd`` has exited: for a
    child that outlives its SIGKILL (uninterruptible sleep), whose event loop may close first."""

    def wait() -> None:
        exits_within(pidfd, None)
        then()

    threading.Thread(target=wait, name="ongrid-reap", daemon=True).start()


def wait_no_reap(pid: int) -> None:
    """Block until ``pid`` exits, leaving it to be reaped (for platforms without pidfds)."""
    with contextlib.suppress(ChildProcessError):
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def reap(pid: int) -> int | None:
    """Reap an exited child; its return code in Popen's convention (negative = signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return None
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        return os.waitstatus_to_exitcode(status)


def reap_by_pidfd(pidfd: int, pid: int) -> int | None:
    """:func:`reap` through the child's pidfd where the platform has ``P_PIDFD``: it can never
    reach another process that took the pid after something else reaped this one."""
    if not hasattr(os, "P_PIDFD"):
        return reap(pid)
    try:
        found = os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
    except ChildProcessError:
        return None
    if found is None:  # pragma: no cover - only with WNOHANG
        return None
    return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status


__all__ = ["after_exit", "exits_within", "reap", "reap_by_pidfd", "wait_no_reap"]
