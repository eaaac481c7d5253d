"""Notices between replicas (LISTEN/NOTIFY) cost nothing to a manager on SQLite.

psycopg takes about 0.1 s to import here: only a manager on PostgreSQL, whose notices connect,
may load it. (What the notices do is tested with real replicas in test_follow.py.)
"""

from __future__ import annotations

import subprocess
import sys


def test_a_manager_on_sqlite_never_imports_the_postgresql_driver() -> None:
    probe = (
        "import sys, ongrid_skills.manager, ongrid_skills.runtime, ongrid_skills.fleet.notices;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
