"""The keyed, anchored audit chain against an attacker who edits the SQLite file.

The attacker opens ``ongrid.db`` with the sqlite3 module (as anyone with write access to the file
could), but does not have the audit key nor the data dir's ``audit.head``, unless a test says so.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ongrid_skills.errors import ConfigError
from ongrid_skills.settings import Settings
from ongrid_skills.store import Store, open_store
from ongrid_skills.store.anchor import Link
from ongrid_skills.store.audit import HEAD_KEY, entry_hash
from ongrid_skills.store.auditkey import Sealer, canonical
from ongrid_skills.store.auditsink import read_witnesses
from tests.support.agent import make_settings
from tests.support.mcp import venv_bin
from tests.support.server import Server, running_app
from tests.support.skills import MakeSkill

ECHO = "#!/bin/sh\ncat\n"
Hasher = Callable[[str, int, float, str, str, str | None, Any], str]


@pytest.fixture
def server(tmp_path: Path, skills_root: Path, make_skill: MakeSkill) -> Iterator[Server]:
    make_skill("peek", ECHO)
    sink = tmp_path / "shipped" / "audit.jsonl"
    sink.parent.mkdir()
    with running_app(make_settings(tmp_path, skills_root, audit_sink=str(sink))) as app:
        yield app


def run_peek(server: Server, n: int = 1) -> None:
    for i in range(n):
        ran = server.call("POST", "/v1/skills/peek/execute", "olga", json={"args": {"i": i}})
        assert ran.status_code == 200, ran.text


def verify(server: Server) -> dict[str, Any]:
    response = server.call("GET", "/v1/audit/verify", "vera")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def db(data_dir: str | Path) -> sqlite3.Connection:
    return sqlite3.connect(Path(data_dir) / "ongrid.db")


def head_record(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (HEAD_KEY,)).fetchone()
    value: dict[str, Any] = json.loads(row[0])
    return value


def set_head(conn: sqlite3.Connection, head: dict[str, Any]) -> None:
    conn.execute("UPDATE settings SET value = ? WHERE key = ?", (json.dumps(head), HEAD_KEY))


def rechain(conn: sqlite3.Connection, start: int, hasher: Hasher) -> None:
    """Recompute every link from ``start`` on with ``hasher``, and the head record after them."""
    rows = conn.execute(
        "SELECT seq, ts, actor, action, subject, data, prev_hash FROM audit_entries "
        "WHERE seq >= ? ORDER BY seq",
        (start,),
    ).fetchall()
    prev = rows[0][6]
    for seq, ts, actor, action, subject, data, _ in rows:
        digest = hasher(prev, seq, ts, actor, action, subject, json.loads(data))
        conn.execute(
            "UPDATE audit_entries SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, seq)
        )
        prev = digest
    set_head(conn, {**head_record(conn), "seq": rows[-1][0], "hash": prev})


def count_entries(server: Server) -> int:
    check = verify(server)
    assert check["ok"], check
    entries: int = check["entries"]
    assert check["anchor"] == entries  # the request's commits are anchored
    return entries


# ---- what an attacker with write access to the database cannot hide ------------------------
def test_wiping_every_entry_and_the_head_is_reported_as_a_wiped_chain(server: Server) -> None:
    run_peek(server, 2)
    count = count_entries(server)
    with db(server.settings.data_dir) as conn:
        conn.execute("DELETE FROM audit_entries")
        conn.execute("DELETE FROM settings WHERE key = ?", (HEAD_KEY,))

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == 0
    assert any("wiped" in p and f"entry {count}" in p for p in check["problems"]), check


def test_deleting_the_newest_entry_and_repointing_the_head_is_reported_as_truncated(
    server: Server,
) -> None:
    run_peek(server)
    count = count_entries(server)
    with db(server.settings.data_dir) as conn:
        (prev,) = conn.execute(
            "SELECT prev_hash FROM audit_entries WHERE seq = ?", (count,)
        ).fetchone()
        conn.execute("DELETE FROM audit_entries WHERE seq = ?", (count,))
        set_head(conn, {**head_record(conn), "seq": count - 1, "hash": prev})

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == count - 1
    assert any("truncated" in p and f"entry {count}" in p for p in check["problems"]), check
    assert any("head record" in p for p in check["problems"]), check


def test_a_truncation_stays_reported_after_the_chain_grows_over_the_deleted_entries(
    server: Server,
) -> None:
    run_peek(server)
    count = count_entries(server)
    with db(server.settings.data_dir) as conn:
        (prev,) = conn.execute(
            "SELECT prev_hash FROM audit_entries WHERE seq = ?", (count - 1,)
        ).fetchone()
        conn.execute("DELETE FROM audit_entries WHERE seq >= ?", (count - 1,))
        set_head(conn, {**head_record(conn), "seq": count - 2, "hash": prev})

    run_peek(server, 2)  # new, validly keyed entries take the deleted seqs and go beyond them

    check = verify(server)
    assert check["ok"] is False
    assert check["anchor"] == check["entries"]  # the anchor moved on with the new chain…
    assert check["first_broken"] == count - 1  # …but kept the evidence of the old one
    deleted = f"entries {count - 1}..{count} had been deleted"
    assert any(deleted in p for p in check["problems"]), check


def test_a_truncation_stays_reported_when_a_restarted_store_grows_over_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data))) as store:
        append(store, 3)
    with db(data) as conn:
        (prev,) = conn.execute("SELECT prev_hash FROM audit_entries WHERE seq = 3").fetchone()
        conn.execute("DELETE FROM audit_entries WHERE seq = 3")
        set_head(conn, {**head_record(conn), "seq": 2, "hash": prev})

    with closing(open_store(str(data))) as store:  # knows nothing of the deleted entry…
        append(store, 2)
        check = store.audit.verify()

    assert check.ok is False  # …but the anchor file does
    assert (check.entries, check.anchor, check.first_broken) == (4, 4, 3)
    assert any("entry 3 was anchored with hash" in p for p in check.problems), check


def test_an_entry_edited_with_its_plain_sha256_chain_recomputed_fails_at_that_entry(
    server: Server,
) -> None:
    run_peek(server, 2)
    count = count_entries(server)
    with db(server.settings.data_dir) as conn:
        conn.execute(
            "UPDATE audit_entries SET actor = 'mallory' WHERE seq = 3",
        )
        rechain(conn, 3, entry_hash)  # the old, unkeyed chain: anyone can recompute it

    check = verify(server)

    assert check["ok"] is False
    assert check["entries"] == count
    assert check["first_broken"] == 3
    assert check["problems"][0].startswith("entry 3: hashed without the key"), check


def test_the_cli_reports_a_wiped_chain_and_exits_1(server: Server) -> None:
    run_peek(server)
    count_entries(server)
    with db(server.settings.data_dir) as conn:
        conn.execute("DELETE FROM audit_entries")
        conn.execute("DELETE FROM settings WHERE key = ?", (HEAD_KEY,))

    code, out, err = cli(Path(server.settings.data_dir), "audit", "verify")

    assert code == 1, err
    assert "the chain is wiped" in out
    assert "0 entries, TAMPERED" in err


def test_garbage_in_the_head_record_or_an_entry_is_reported_not_raised(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data))) as store:
        append(store, 3)
    with db(data) as conn:
        conn.execute("UPDATE audit_entries SET data = 'not json' WHERE seq = 2")
        conn.execute("UPDATE settings SET value = 'garbage{' WHERE key = ?", (HEAD_KEY,))

    with closing(open_store(str(data))) as store:
        check = store.audit.verify()

    assert check.ok is False
    assert check.first_broken == 2
    assert "entry 2: content does not match its hash (data is not JSON)" in check.problems
    assert "the chain head record is malformed" in check.problems


# ---- the key and the sink -----------------------------------------------------------------
def test_an_attacker_with_the_key_is_caught_by_the_shipped_sink(server: Server) -> None:
    run_peek(server, 2)
    count = count_entries(server)
    data_dir = Path(server.settings.data_dir)
    sealer = Sealer(bytes.fromhex((data_dir / "audit.key").read_text()), "stolen")

    def keyed(prev: str, seq: int, ts: float, *rest: Any) -> str:
        return sealer.seal(prev, canonical(seq, ts, *rest))

    with db(data_dir) as conn:
        conn.execute("UPDATE audit_entries SET actor = 'mallory' WHERE seq = 2")
        rechain(conn, 2, keyed)
        (newest,) = conn.execute(
            "SELECT hash FROM audit_entries WHERE seq = ?", (count,)
        ).fetchone()
    anchor = json.loads((data_dir / "audit.head").read_text())
    (data_dir / "audit.head").write_text(json.dumps({**anchor, "hash": newest}))
    assert verify(server)["ok"]  # the key and the data dir are enough to rewrite history…

    sink = Path(server.settings.audit_sink or "")
    lines = sink.read_text().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, count + 1))
    code, out, err = cli(data_dir, "audit", "verify", "--against", str(sink))

    assert code == 1, err  # …but not the copy of the sink shipped elsewhere
    assert f"entry 2 does not match {sink} (line 2)" in out


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "audit.key"
    key.write_text(os.urandom(32).hex())
    key.chmod(0o644)
    open_store(str(tmp_path / "data")).close()  # creates data/audit.key, 0600
    default = tmp_path / "data" / "audit.key"
    default.chmod(0o640)

    with pytest.raises(ConfigError, match=r"group or others \(mode 0644\).*chmod 600"):
        open_store(str(tmp_path / "data"), audit_key_file=str(key))
    with pytest.raises(ConfigError, match="mode 0640"):
        open_store(str(tmp_path / "data"))


def test_the_default_key_is_created_0600_and_never_replaced_for_a_keyed_chain(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data))) as store:
        append(store, 2)
    assert (data / "audit.key").stat().st_mode & 0o777 == 0o600
    (data / "audit.key").unlink()

    with pytest.raises(ConfigError, match=r"keyed .* but its key .*audit\.key is missing"):
        open_store(str(data))
    assert not (data / "audit.key").exists()


def test_a_store_opened_with_another_key_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data))) as store:
        append(store, 1)
        key_id = store.audit.sealer.key_id
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    other.chmod(0o600)

    with pytest.raises(ConfigError, match=f"keyed with key id {key_id}.*same audit key"):
        open_store(str(data), audit_key_file=str(other))


def test_a_chain_written_before_keying_verifies_and_is_keyed_from_its_next_entry(
    tmp_path: Path,
) -> None:
    data = legacy_store(tmp_path, entries=3)
    with closing(open_store(str(data))) as store:
        before = store.audit.verify()
        append(store, 2)
        after = store.audit.verify()

    assert (before.ok, before.entries, before.keyed_from, before.anchor) == (True, 3, None, None)
    assert any("before the chain was keyed" in w for w in before.warnings)
    assert (after.ok, after.entries, after.keyed_from, after.anchor) == (True, 5, 4, 5)
    assert after.warnings == []


def test_the_unkeyed_prefix_is_protected_by_the_first_keyed_entry(tmp_path: Path) -> None:
    data = legacy_store(tmp_path, entries=3)
    with closing(open_store(str(data))) as store:
        append(store, 1)
    with db(data) as conn:
        conn.execute("UPDATE audit_entries SET actor = 'mallory' WHERE seq = 2")
        rows = conn.execute("SELECT seq FROM audit_entries WHERE seq <= 3").fetchall()
        assert len(rows) == 3
        rechain_range(conn, 2, 3)  # plain hashes recomputed up to the keyed entry 4

    with closing(open_store(str(data))) as store:
        check = store.audit.verify()

    assert check.ok is False
    assert check.first_broken == 4
    assert check.problems == ["entry 4: previous hash does not match the chain"]


def test_the_syslog_sink_sends_one_datagram_per_entry(tmp_path: Path) -> None:
    address = str(tmp_path / "log.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(address)
    receiver.settimeout(10)
    try:
        with closing(open_store(str(tmp_path / "data"), audit_sink=f"syslog:{address}")) as store:
            append(store, 2)
            store.audit.anchor.flush()
            got = [receiver.recv(4096).decode() for _ in range(2)]
            key_id = store.audit.sealer.key_id
            hashes = [e["hash"] for e in reversed(store.audit.entries())]
    finally:
        receiver.close()

    assert all(m.startswith("<85>ongrid-skills[") for m in got), got  # authpriv.notice
    lines = [json.loads(m[m.index("{") :]) for m in got]
    assert lines == [{"seq": i + 1, "hash": h, "key": key_id} for i, h in enumerate(hashes)]
    (tmp_path / "extract.log").write_text("\n".join(got) + "\n")
    seen = [(w.seq, w.hash) for w in read_witnesses(str(tmp_path / "extract.log"), key_id)]
    assert seen == [(1, hashes[0]), (2, hashes[1])]


def test_a_failing_sink_does_not_stop_the_anchor(tmp_path: Path) -> None:
    address = tmp_path / "log.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(address))
    store = open_store(str(tmp_path / "data"), audit_sink=f"syslog:{address}")
    receiver.close()
    address.unlink()  # the syslog daemon went away
    with closing(store):
        append(store, 1)
        check = store.audit.verify()

    assert (check.ok, check.anchor) == (True, 1)


def test_the_audit_key_file_and_sink_are_settings(tmp_path: Path) -> None:
    settings = Settings.load(
        {"ONGRID_AUDIT_KEY_FILE": "/etc/ongrid/audit.key", "ONGRID_AUDIT_SINK": "syslog"}
    )

    assert (settings.audit_key_file, settings.audit_sink) == ("/etc/ongrid/audit.key", "syslog")
    assert (Settings().audit_key_file, Settings().audit_sink) == (None, None)


def test_the_anchor_never_goes_backwards_and_ignores_rolled_back_entries(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with closing(open_store(str(data))) as first, closing(open_store(str(data))) as second:
        append(first, 3)
        first.audit.anchor.flush()
        with pytest.raises(RuntimeError), second.tx() as conn:
            second.audit.append(conn, "test", "test.rolled_back")
            raise RuntimeError("rollback")
        second.audit.anchor.flush()
        assert json.loads((data / "audit.head").read_text())["seq"] == 3
        # a stale writer (seq 2 arriving late) never moves the anchor back
        second.audit.anchor.push([first_link(first, 2)])
        second.audit.anchor.flush()
        assert json.loads((data / "audit.head").read_text())["seq"] == 3
        assert second.audit.verify().ok


# ---- helpers ------------------------------------------------------------------------------
def append(store: Store, n: int) -> None:
    for i in range(n):
        with store.tx() as conn:
            store.audit.append(conn, "test", "test.appended", None, {"n": i})


def first_link(store: Store, seq: int) -> Link:
    (entry,) = [e for e in store.audit.entries() if e["seq"] == seq]
    return Link(seq, entry["hash"], entry["prev_hash"])


def legacy_store(tmp_path: Path, entries: int) -> Path:
    """A data dir as the unkeyed version left it: plain SHA-256 entries, no key, no anchor."""
    data = tmp_path / "data"
    open_store(str(data)).close()
    (data / "audit.key").unlink()
    prev = "0" * 64
    with db(data) as conn:
        for seq in range(1, entries + 1):
            ts, payload = 1_700_000_000.0 + seq, {"n": seq}
            digest = entry_hash(prev, seq, ts, "old", "old.entry", None, payload)
            conn.execute(
                "INSERT INTO audit_entries (seq, ts, actor, action, subject, data, prev_hash, "
                "hash) VALUES (?, ?, 'old', 'old.entry', NULL, ?, ?, ?)",
                (seq, ts, json.dumps(payload), prev, digest),
            )
            prev = digest
        conn.execute(
            "INSERT INTO settings (key, value) VALUES (?, ?)",
            (HEAD_KEY, json.dumps({"seq": entries, "hash": prev})),
        )
    return data


def rechain_range(conn: sqlite3.Connection, start: int, end: int) -> None:
    rows = conn.execute(
        "SELECT seq, ts, actor, action, subject, data, prev_hash FROM audit_entries "
        "WHERE seq BETWEEN ? AND ? ORDER BY seq",
        (start, end),
    ).fetchall()
    prev = rows[0][6]
    for seq, ts, actor, action, subject, data, _ in rows:
        digest = entry_hash(prev, seq, ts, actor, action, subject, json.loads(data))
        conn.execute(
            "UPDATE audit_entries SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, seq)
        )
        prev = digest


def cli(data_dir: Path, *args: str) -> tuple[int, str, str]:
    env = {"PATH": os.environ["PATH"], "ONGRID_DATA_DIR": str(data_dir)}
    proc = subprocess.run(
        [venv_bin("ongrid-skills"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stdout, proc.stderr
