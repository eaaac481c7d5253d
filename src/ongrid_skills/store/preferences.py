"""Console preferences per principal: the ``preferences`` table (migration 0012).

A preference is how a page is shown to someone (the catalogue as cards or as a table), kept on
the server so that it follows the principal from one browser to the next. It is not audited:
it grants nothing and changes nothing any other principal sees. Values are short JSON values;
the door that reads one checks it against the choices it knows and falls back to its default.
"""

from __future__ import annotations

import time
from typing import Any, cast

from sqlalchemy import Table, select

from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import PreferenceRow

_PREFERENCES = cast(Table, PreferenceRow.__table__)


class PreferenceRepo:
    """Read and write one principal's preferences by name."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, principal: str, name: str) -> Any:
        """The stored value, or None when the principal never chose one."""
        query = select(_PREFERENCES.c.value).where(
            _PREFERENCES.c.principal == principal, _PREFERENCES.c.name == name
        )
        with self.db.read() as conn:
            return conn.execute(query).scalar()

    def set(self, principal: str, name: str, value: Any) -> None:
        """Store ``value`` (the last writer wins)."""
        where = (_PREFERENCES.c.principal == principal) & (_PREFERENCES.c.name == name)
        now = time.time()
        with self.db.tx() as conn:
            changed = conn.execute(
                _PREFERENCES.update().where(where).values(value=value, updated_at=now)
            ).rowcount
            if changed == 0:
                conn.execute(
                    _PREFERENCES.insert().values(
                        principal=principal, name=name, value=value, updated_at=now
                    )
                )
