"""Web console sessions in the store: hashed ids, expiry, tokens, audit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from ongrid_skills.store import Store, open_store
from ongrid_skills.store.sessions import SEEN_GRANULARITY, hash_session_id
from ongrid_skills.types import Role

HOUR = 3600.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(str(tmp_path / "data"))
    try:
        yield opened
    finally:
        opened.close()


def test_a_session_is_stored_as_the_hash_of_its_id_and_acts_as_its_token(store: Store) -> None:
    _token, info = store.tokens.create("olga", Role.OPERATOR)
    session_id, opened = store.sessions.open(info, lifetime=HOUR, client="10.1.2.3")
    with store.read() as conn:
        rows = conn.execute(text("SELECT id_hash, token_id FROM web_sessions")).all()
    found = store.sessions.find(session_id, idle=HOUR)
    assert rows == [(hash_session_id(session_id), info.id)]
    assert found is not None
    assert (found.name, found.role, found.id_hash) == ("olga", Role.OPERATOR, opened.id_hash)
    assert found.expires_at == pytest.approx(opened.created_at + HOUR)
    entry = store.audit.entries(limit=1, action="session.opened")[0]
    assert entry["actor"] == "olga"
    assert entry["subject"] == opened.short
    assert entry["data"] == {"token_id": info.id, "role": "operator", "client": "10.1.2.3"}
    assert session_id not in str(entry)


def test_a_session_ends_at_its_absolute_expiry_even_when_used(store: Store) -> None:
    _token, info = store.tokens.create("vera", Role.VIEWER)
    session_id, opened = store.sessions.open(info, lifetime=HOUR)
    start = opened.created_at
    for minute in range(1, 60, 10):  # used every ten minutes
        assert store.sessions.find(session_id, idle=900, now=start + minute * 60) is not None
    assert store.sessions.find(session_id, idle=900, now=start + HOUR) is None


def test_a_session_ends_after_the_idle_limit_counted_from_its_last_use(store: Store) -> None:
    _token, info = store.tokens.create("vera", Role.VIEWER)
    session_id, opened = store.sessions.open(info, lifetime=10 * HOUR)
    start = opened.created_at
    assert store.sessions.find(session_id, idle=900, now=start + 800) is not None
    assert store.sessions.find(session_id, idle=900, now=start + 1600) is not None  # 800 s idle
    assert store.sessions.find(session_id, idle=900, now=start + 2600) is None  # 1000 s idle


def test_last_use_is_written_at_most_once_a_minute(store: Store) -> None:
    _token, info = store.tokens.create("vera", Role.VIEWER)
    session_id, opened = store.sessions.open(info, lifetime=HOUR)

    def seen_at() -> float:
        with store.read() as conn:
            return float(conn.execute(text("SELECT seen_at FROM web_sessions")).scalar_one())

    store.sessions.find(session_id, idle=HOUR, now=opened.created_at + SEEN_GRANULARITY / 2)
    assert seen_at() == opened.created_at
    later = opened.created_at + SEEN_GRANULARITY + 1
    store.sessions.find(session_id, idle=HOUR, now=later)
    assert seen_at() == later


def test_a_check_that_does_not_touch_the_session_lets_it_go_idle(store: Store) -> None:
    _token, info = store.tokens.create("vera", Role.VIEWER)
    session_id, opened = store.sessions.open(info, lifetime=10 * HOUR)
    start = opened.created_at
    assert store.sessions.find(session_id, idle=900, now=start + 800, touch=False) is not None
    assert store.sessions.find(session_id, idle=900, now=start + 1000, touch=False) is None


def test_revoking_a_token_ends_its_sessions_and_a_new_role_shows_at_once(store: Store) -> None:
    _token, info = store.tokens.create("olga", Role.OPERATOR)
    session_id, _opened = store.sessions.open(info, lifetime=HOUR)
    with store.tx() as conn:
        conn.execute(text("UPDATE api_tokens SET role = 'viewer' WHERE id = :id"), {"id": info.id})
    demoted = store.sessions.find(session_id, idle=HOUR)
    store.tokens.revoke(info.id)
    assert demoted is not None
    assert demoted.role is Role.VIEWER
    assert store.sessions.find(session_id, idle=HOUR) is None


def test_closing_a_session_deletes_it_once_and_audits_it(store: Store) -> None:
    _token, info = store.tokens.create("olga", Role.OPERATOR)
    session_id, opened = store.sessions.open(info, lifetime=HOUR)
    assert store.sessions.close(opened) is True
    assert store.sessions.close(opened) is False
    assert store.sessions.find(session_id, idle=HOUR) is None
    closed = store.audit.entries(limit=5, action="session.closed")
    assert [(e["actor"], e["subject"]) for e in closed] == [("olga", opened.short)]


def test_purging_deletes_only_expired_sessions(store: Store) -> None:
    _token, info = store.tokens.create("olga", Role.OPERATOR)
    _short_id, short = store.sessions.open(info, lifetime=60)
    long_id, _long = store.sessions.open(info, lifetime=HOUR)
    assert store.sessions.purge(idle=HOUR, now=short.created_at + 61) == 1
    assert store.sessions.count() == 1
    assert store.sessions.find(long_id, idle=HOUR) is not None


def test_a_refused_login_is_audited_without_what_was_tried(store: Store) -> None:
    store.sessions.refused("10.9.8.7", "invalid or revoked token")
    entry = store.audit.entries(limit=1, action="session.refused")[0]
    assert entry["actor"] == "anonymous"
    assert entry["data"] == {"client": "10.9.8.7", "reason": "invalid or revoked token"}
    assert store.audit.verify().ok
