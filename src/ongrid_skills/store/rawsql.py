"""Hot-path statements as driver SQL: the few writes every execution makes.

SQLAlchemy Core costs ~150 µs per statement here (compilation cache lookups, bind processing,
result set-up); the same statement through ``exec_driver_sql`` costs a fraction of that. Each
execution writes two transactions (the row before the spawn; the outcome, events and audit
after), so these statements are what REST latency is made of. The SQL is plain and portable;
placeholders follow the driver's paramstyle and JSON columns receive JSON text. Statements are
built from our own table and column names only, never from input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, StatementError


def dumps(value: Any) -> str | None:
    """The JSON text of a JSON column's value (None stays SQL NULL)."""
    return None if value is None else _ENCODE(value)


# One encoder for every value: json.dumps with a keyword argument builds a new one each time
# (1.9 → 1.3 µs a value, and a call writes a dozen).
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


_IDENT = re.compile(r"[a-z_]+")


def _ident(*names: str) -> None:
    """Statements are built from our own table and column names only, never from input."""
    for name in names:
        if not _IDENT.fullmatch(name):
            raise ValueError(f"not an identifier: {name!r}")


class RawSQL:
    """Statements for one engine's dialect."""

    def __init__(self, engine: Engine) -> None:
        style = engine.dialect.paramstyle
        self.mark = "?" if style == "qmark" else "%s"
        self.direct = engine.dialect.name == "sqlite"
        self.dialect = engine.dialect
        # SQLite has no FOR UPDATE; its writers hold the database lock from BEGIN IMMEDIATE on.
        self.for_update = "" if self.direct else " FOR UPDATE"

    def run(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> Any:
        """Execute one statement with positional parameters; return the driver's result (it
        has ``rowcount`` and ``fetchone()``)."""
        if not self.direct:
            return conn.exec_driver_sql(sql, params)
        try:
            return conn.connection.dbapi_connection.execute(sql, params)  # type: ignore[union-attr]
        except self.dialect.loaded_dbapi.Error as exc:
            raise self._wrapped(sql, params, exc) from exc

    def run_many(self, conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Execute one statement once per row (the driver's executemany)."""
        if not self.direct:
            conn.exec_driver_sql(sql, rows)
            return
        try:
            conn.connection.dbapi_connection.executemany(sql, rows)  # type: ignore[union-attr]
        except self.dialect.loaded_dbapi.Error as exc:
            raise self._wrapped(sql, rows, exc) from exc

    def one(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> Any:
        """The first row of a query (a sequence of its columns), or None."""
        if not self.direct:
            return conn.exec_driver_sql(sql, params).first()
        return self.run(conn, sql, params).fetchone()

    def _wrapped(self, sql: str, params: Any, exc: Exception) -> StatementError:
        """The SQLAlchemy error (``OperationalError``, ``IntegrityError``…) for a driver error."""
        return DBAPIError.instance(
            sql, params, exc, self.dialect.loaded_dbapi.Error, dialect=self.dialect
        )

    def insert_sql(self, table: str, columns: Sequence[str]) -> str:
        _ident(table, *columns)
        marks = ", ".join(self.mark for _ in columns)
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"  # noqa: S608

    def update_sql(self, table: str, columns: Sequence[str], key: str, *also: str) -> str:
        """UPDATE ``columns`` of the row whose ``key`` (and each column of ``also``) equals the
        parameters that follow the new values, in that order."""
        _ident(table, key, *columns, *also)
        sets = ", ".join(f"{c} = {self.mark}" for c in columns)
        where = " AND ".join(f"{c} = {self.mark}" for c in (key, *also))
        return f"UPDATE {table} SET {sets} WHERE {where}"  # noqa: S608

    def select_sql(self, table: str, column: str, key: str) -> str:
        """SELECT one column by key, locking the row where the dialect can (the audit head)."""
        _ident(table, column, key)
        return f"SELECT {column} FROM {table} WHERE {key} = {self.mark}{self.for_update}"  # noqa: S608
