"""How the ``ongrid-skills`` command prints: human output on a terminal, exact output in pipes.

``terminal`` decides (a terminal or a pipe, NO_COLOR) and makes foreign text printable;
``tables`` holds the ``-o/--output table|json|yaml`` choice and the two table renderers;
``listings`` the columns of each list, the lines of ``approvals watch`` and the view of
``show``; ``records`` the views of one approval request or one Execution of a server;
``run_view`` the live progress of ``run`` (local or on a server) and its result. rich is
imported only when a terminal is drawn on, never at import. Nothing in this package reads
settings, the store or a server.
"""

from ongrid_skills.doors.cli.output.listings import (
    approval_event,
    approvals_table,
    audit_table,
    credentials_table,
    executions_table,
    print_skill,
    skills_table,
    tokens_table,
)
from ongrid_skills.doors.cli.output.records import print_approval, print_execution_record
from ongrid_skills.doors.cli.output.run_view import (
    RunView,
    print_execution,
    print_failure,
    print_result,
)
from ongrid_skills.doors.cli.output.tables import (
    emit,
    output_option,
    print_line,
    resolve,
    to_yaml,
)

__all__ = [
    "RunView",
    "approval_event",
    "approvals_table",
    "audit_table",
    "credentials_table",
    "emit",
    "executions_table",
    "output_option",
    "print_approval",
    "print_execution",
    "print_execution_record",
    "print_failure",
    "print_line",
    "print_result",
    "print_skill",
    "resolve",
    "skills_table",
    "to_yaml",
    "tokens_table",
]
