"""A diagnostic ``serve``: the real server with the writes of each call stubbed out.

``bench_rest.py`` runs it beside ``serve`` and the REST floor to show where REST's cost per
request goes: the same process, door, auth, gate, runner and answer as ``serve``, but the row
written before the spawn, the outcome, the events and the audit entries are not written (their
transactions stay, empty). Never a way to run the product: nothing it does is recorded.

    python bench/rest_nostore.py -q serve --port 8765     # the arguments of ``ongrid-skills``
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def stub_call_writes() -> None:
    from ongrid_skills.store.audit import AuditLog
    from ongrid_skills.store.executions import ExecutionRepo

    def insert(self: ExecutionRepo, conn: Any, execution: Any, **_: Any) -> None:
        return None

    def update(self: ExecutionRepo, conn: Any, execution: Any, **_: Any) -> bool:
        return True

    def add_events(self: ExecutionRepo, conn: Any, execution_id: str, events: Any) -> None:
        return None

    def append(self: AuditLog, conn: Any, *_: Any, **__: Any) -> int:
        return 0

    ExecutionRepo.insert = insert  # type: ignore[method-assign]
    ExecutionRepo.update = update  # type: ignore[method-assign]
    ExecutionRepo.add_events = add_events  # type: ignore[method-assign]
    AuditLog.append = append  # type: ignore[method-assign]


if __name__ == "__main__":
    from ongrid_skills.doors.cli.main import main

    stub_call_writes()
    sys.argv[0] = "ongrid-skills"
    raise SystemExit(main())
