"""Verification of the audit chain: every link, the head record, the anchor and the witnesses.

What is checked, in the order it is reported:

- each entry: its seq follows the previous one, its ``prev_hash`` is the previous entry's hash,
  its hash is the keyed MAC of its content (or, in the prefix written before the chain was keyed,
  the plain SHA-256). A plain hash after the first keyed entry is a rewrite by someone without
  the key. ``first_broken`` is the seq of the first entry that fails.
- the head record in the settings table names the newest entry and where keying began.
- the head anchor outside the database (``audit.head``): an anchored seq beyond the newest entry
  is a truncated tail (no entry at all: a wiped chain), an anchored entry with another hash is a
  rewrite, a head record behind the anchor was moved back, a recorded divergence stays reported.
- witnesses (sink lines given by the operator): the same checks, entry by entry.

This module only reads; it never repairs the chain or moves the anchor.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from ongrid_skills.store.anchor import AnchorUnreadable, read_anchor
from ongrid_skills.store.auditkey import Sealer, canonical
from ongrid_skills.store.auditsink import Witness
from ongrid_skills.store.connection import Database

GENESIS = "0" * 64
_ENTRIES = text(
    "SELECT seq, ts, actor, action, subject, data, prev_hash, hash FROM audit_entries ORDER BY seq"
)
_HEAD = text("SELECT value FROM settings WHERE key = :key")
_NOT_JSON = object()  # never equal to what an entry was hashed with


def _json(value: Any) -> Any:
    """A JSON column's value: text on SQLite (decoded here), already decoded on PostgreSQL."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return _NOT_JSON


@dataclass(frozen=True, slots=True)
class Verification:
    """The report: ``ok`` is False when any problem was found; warnings do not fail it."""

    ok: bool
    entries: int
    problems: list[str]
    first_broken: int | None = None  # seq of the first entry whose link or content fails
    keyed_from: int | None = None  # seq of the first keyed entry (None: not keyed yet)
    anchor: int | None = None  # the seq the head anchor records (None: no anchor)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "problems": self.problems,
            "first_broken": self.first_broken,
            "keyed_from": self.keyed_from,
            "anchor": self.anchor,
            "warnings": self.warnings,
        }


class _Report:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.first_broken: int | None = None

    def broken(self, seq: int, message: str) -> None:
        self.problems.append(message)
        if self.first_broken is None or seq < self.first_broken:
            self.first_broken = seq


def verify_chain(
    db: Database, sealer: Sealer, anchor_path: str, head_key: str, witnesses: Iterable[Witness]
) -> Verification:
    report = _Report()
    anchor_name = f"the head anchor {anchor_path}"
    try:
        anchored = read_anchor(anchor_path)
    except AnchorUnreadable as exc:
        anchored = None
        report.problems.append(f"{anchor_name} is unreadable: {exc}")
    watched: dict[int, list[Witness]] = {}
    if anchored is not None:
        watched.setdefault(anchored.seq, []).append(Witness(anchored.seq, anchored.hash, ""))
    external = list(witnesses)
    for witness in external:
        watched.setdefault(witness.seq, []).append(witness)

    prev, newest, count, keyed_from = GENESIS, 0, 0, None
    found: dict[int, str] = {}
    with db.read() as conn:
        # Driver values, not the JSON type's: a tampered column is reported, never raised.
        for row in conn.execute(_ENTRIES).mappings():
            seq = row["seq"]
            count += 1
            if seq != newest + 1:
                report.broken(newest + 1, f"entries {newest + 1}..{seq - 1} are missing")
            if row["prev_hash"] != prev:
                report.broken(seq, f"entry {seq}: previous hash does not match the chain")
            if _check_entry(report, sealer, row, keyed_from) and keyed_from is None:
                keyed_from = seq
            if seq in watched:
                found[seq] = row["hash"]
            prev, newest = row["hash"], seq
        value = conn.execute(_HEAD, {"key": head_key}).scalar()
    head = _json(value)
    if head is not None and not (isinstance(head, dict) and isinstance(head.get("seq"), int)):
        report.problems.append("the chain head record is malformed")
        head = None
        count_for_head = 0  # reported once: not also as missing
    else:
        count_for_head = count

    _check_head(report, head, count_for_head, newest, prev, keyed_from)
    if anchored is None:
        if count:
            report.warnings.append(
                f"no head anchor at {anchor_path}: deleting the newest entries cannot be "
                "detected from this data dir until it anchors its next commit"
            )
    else:
        if anchored.key and anchored.key != sealer.key_id:
            report.problems.append(
                f"{anchor_name} was written with key id {anchored.key}, not {sealer.key_id}"
            )
        _check_witness(report, anchored.seq, anchored.hash, anchor_name, count, newest, found)
        if head is not None and (
            head["seq"] < anchored.seq
            or (head.get("seq") == anchored.seq and head.get("hash") != anchored.hash)
        ):
            report.problems.append(
                f"the head record (entry {head.get('seq')}) does not match {anchor_name} "
                f"(entry {anchored.seq}): it was moved back or rewritten"
            )
        if anchored.diverged is not None:
            d = anchored.diverged
            report.broken(
                d["seq"] if isinstance(d.get("seq"), int) else 0,
                f"the chain was truncated or rewritten, then grew again: {d.get('detail')} "
                f"({anchor_name} keeps this record until it is removed)",
            )
    _check_external(report, external, count, newest, found)
    if count and keyed_from is None:
        report.warnings.append(
            f"entries 1..{newest} were written before the chain was keyed: their plain SHA-256 "
            "can be recomputed by anyone who can write the database (the next entry keys them)"
        )
    return Verification(
        ok=not report.problems,
        entries=count,
        problems=report.problems,
        first_broken=report.first_broken,
        keyed_from=keyed_from,
        anchor=anchored.seq if anchored is not None else None,
        warnings=report.warnings,
    )


def _check_entry(report: _Report, sealer: Sealer, row: Any, keyed_from: int | None) -> bool:
    """True when the entry carries a valid MAC; otherwise False, with any problem reported
    (an unkeyed entry is only a problem after the first keyed one)."""
    seq, prev = row["seq"], str(row["prev_hash"])
    data = _json(row["data"])
    if data is _NOT_JSON:
        report.broken(seq, f"entry {seq}: content does not match its hash (data is not JSON)")
        return False
    body = canonical(seq, row["ts"], row["actor"], row["action"], row["subject"], data)
    if sealer.seal(prev, body) == row["hash"]:
        return True
    if hashlib.sha256((prev + body).encode()).hexdigest() != row["hash"]:
        report.broken(seq, f"entry {seq}: content does not match its hash")
    elif keyed_from is not None:
        report.broken(
            seq,
            f"entry {seq}: hashed without the key (plain SHA-256) although the chain is "
            f"keyed from entry {keyed_from}: rewritten by someone without the key",
        )
    return False


def _check_head(
    report: _Report,
    head: dict[str, Any] | None,
    count: int,
    newest: int,
    last_hash: str,
    keyed_from: int | None,
) -> None:
    if head is None:
        if count:
            report.problems.append("the chain head record is missing")
        return
    if head.get("seq") != newest or head.get("hash") != last_hash:
        report.problems.append(
            f"the chain ends at entry {newest} but its head says {head.get('seq')}: "
            "newest entries were deleted or altered"
        )
    recorded = head.get("keyed_from")
    if count and recorded is not None and recorded != keyed_from:
        first = f"the first keyed entry is {keyed_from}" if keyed_from else "no entry is keyed"
        report.problems.append(
            f"the head record says the chain is keyed from entry {recorded}, but {first}: "
            "keyed entries were replaced"
        )


def _check_witness(
    report: _Report,
    seq: int,
    digest: str,
    name: str,
    count: int,
    newest: int,
    found: dict[int, str],
) -> bool:
    """One external record against the chain; False when it disagrees."""
    if seq > newest:
        if count == 0:
            report.problems.append(
                f"the chain is wiped: it has no entries, but {name} records entry {seq}"
            )
        else:
            report.problems.append(
                f"the chain is truncated: it ends at entry {newest}, but {name} records entry "
                f"{seq} (entries {newest + 1}..{seq} were deleted)"
            )
        return False
    if seq in found and found[seq] != digest:
        report.broken(seq, f"entry {seq} does not match {name}: rewritten from there on")
        return False
    return True


def _check_external(
    report: _Report, witnesses: list[Witness], count: int, newest: int, found: dict[int, str]
) -> None:
    """Sink lines, per file: the furthest one beyond the chain, then the first that disagrees."""
    by_source: dict[str, list[Witness]] = {}
    for witness in witnesses:
        by_source.setdefault(witness.source, []).append(witness)
    for source, lines in by_source.items():
        beyond = [w for w in lines if w.seq > newest]
        if beyond:
            w = max(beyond, key=lambda w: w.seq)
            _check_witness(report, w.seq, w.hash, f"{source} (line {w.line})", count, newest, found)
        for w in sorted((w for w in lines if w.seq <= newest), key=lambda w: w.seq):
            name = f"{source} (line {w.line})"
            if not _check_witness(report, w.seq, w.hash, name, count, newest, found):
                break
