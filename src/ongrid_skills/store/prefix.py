"""Id prefixes: the filter that finds the rows whose id starts with a few hex digits.

Ids are 32 lowercase hex digits (:func:`ongrid_skills.execution.records.new_id`). A prefix is
matched with a range on the primary key (``prefix <= id < prefix + "g"``), which both SQLite and
PostgreSQL answer from the key's index whatever the column's collation, where ``LIKE 'ab%'``
would scan (SQLite's LIKE is case-insensitive, PostgreSQL's needs ``text_pattern_ops``). The
``LIKE`` is kept beside the range only as the exact test of the rows the range found.

This module builds a clause; it must never run a query.
"""

from __future__ import annotations

import re

from sqlalchemy import ColumnElement, and_

from ongrid_skills.errors import InvalidRequest

#: What an id prefix may be: 1 to 32 hex digits (compared in lower case).
PREFIX = re.compile(r"[0-9a-f]{1,32}")


def normalise(prefix: str) -> str:
    """``prefix`` in lower case; :class:`InvalidRequest` unless it is 1 to 32 hex digits."""
    lowered = prefix.lower()
    if not PREFIX.fullmatch(lowered):
        raise InvalidRequest("id_prefix must be 1 to 32 hex digits")
    return lowered


def id_starts_with(column: ColumnElement[str], prefix: str) -> ColumnElement[bool]:
    """The rows whose ``column`` starts with ``prefix`` (hex digits, see :func:`normalise`).

    Why ``"g"``: every character of an id is at most ``"f"``, so every id that starts with the
    prefix sorts before the prefix followed by ``"g"``, and every other id sorts outside the
    range."""
    wanted = normalise(prefix)
    return and_(column >= wanted, column < wanted + "g", column.startswith(wanted))
