"""The worker's ledger: a call taken once is never taken again, across restarts of the worker."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ongrid_skills.fleet.nonces import RETENTION_SECONDS, Ledger
from ongrid_skills.fleet.signing import Call, new_nonce


def a_call(**fields: object) -> Call:
    now = time.time()
    base = Call("call", "c1", "h", "s", "a" * 64, "safe", 0, {}, new_nonce(), now, now + 15, "r")
    return replace(base, **fields)  # type: ignore[arg-type]


def test_a_call_is_taken_once_and_seen_after(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path))
    call = a_call()
    assert ledger.seen(call) is None
    assert ledger.take(call, time.time()) is None
    assert "nonce was already used" in (ledger.seen(call) or "")
    assert ledger.take(call, time.time()) is not None


def test_the_same_call_id_under_a_fresh_nonce_is_refused(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path))
    ledger.take(a_call(), time.time())
    again = a_call()  # same id, new nonce: a manager bug or a forger with a key cannot re-run it
    assert "already taken on this host" in (ledger.seen(again) or "")


def test_the_ledger_survives_a_restart_and_interrupts_what_never_finished(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path))
    finished, cut = a_call(id="done"), a_call(id="cut", skill="clean_disk")
    ledger.take(finished, time.time())
    ledger.take(cut, time.time())
    ledger.finish("done", "succeeded")
    ledger.close()
    again = Ledger(str(tmp_path))  # the worker restarted
    assert again.interrupt_unfinished() == [("cut", "clean_disk")]
    assert again.interrupt_unfinished() == []
    assert again.seen(cut) is not None and again.seen(finished) is not None


def test_pruning_keeps_rows_for_the_retention(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path))
    now = time.time()
    old = a_call(id="old", expires_at=now - RETENTION_SECONDS - 100)
    ledger.take(old, now - RETENTION_SECONDS - 200)
    ledger.take(a_call(id="new"), now)
    for call_id in ("old", "new"):
        ledger.finish(call_id, "succeeded")
    assert ledger.prune(now) == 1
    assert ledger.seen(a_call(id="new")) is not None


def test_a_take_after_a_finish_still_waits_for_the_disk(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path))
    ledger.take(a_call(id="first"), time.time())
    ledger.finish("first", "succeeded")  # does not wait for the disk
    assert ledger.synchronous == 2  # FULL: the next take is durable before its ack
    ledger.take(a_call(id="second"), time.time())
    again = Ledger(str(tmp_path))
    assert again.interrupt_unfinished() == [("second", a_call(id="second").skill)]
