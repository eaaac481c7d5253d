"""The exit codes of the ``ongrid-skills`` command (SPEC §13) and the status of a call → its code.

0 ok, 1 the skill failed, 2 usage or invalid input, 3 denied by policy (a confirmation missing,
an approval rejected or expired), 4 pending approval, 124 timed out. Scripts rely on them: a
code never changes meaning. Plain data: this module must never print or exit.
"""

from __future__ import annotations

from ongrid_skills.execution.records import Status

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_DENIED, EXIT_PENDING, EXIT_TIMEOUT = 0, 1, 2, 3, 4, 124

#: Statuses → exit codes; any other final status (failed, cancelled, interrupted, output too
#: large) is :data:`EXIT_FAILED`. Rejected and expired happen only on a server: the call was
#: not allowed to run, as a refusal by policy is not.
STATUS_EXIT = {
    Status.SUCCEEDED: EXIT_OK,
    Status.TIMED_OUT: EXIT_TIMEOUT,
    Status.INVALID_ARGS: EXIT_USAGE,
    Status.DENIED: EXIT_DENIED,
    Status.REJECTED: EXIT_DENIED,
    Status.EXPIRED: EXIT_DENIED,
    Status.PENDING_APPROVAL: EXIT_PENDING,
}


def status_exit(status: str) -> int:
    """The exit code of a call that ended (or waits) with ``status`` (as the API spells it)."""
    try:
        return STATUS_EXIT.get(Status(status), EXIT_FAILED)
    except ValueError:  # a status this client does not know: not a success
        return EXIT_FAILED
