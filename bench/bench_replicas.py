"""Replicas on PostgreSQL: how late a call's timeline reaches a client of another replica.

    .venv/bin/python bench/bench_replicas.py [--calls 5] [--lines 30] [--gap 0.1] [--flush-ms 500]
                                             [--check]

Starts a PostgreSQL server of its own (initdb, as the tests do: tests/support/postgres.py) and
two `ongrid-skills serve` replicas on one database. A skill on replica A prints a line to stderr
every ``--gap`` seconds, each holding the time it was printed; one SSE client follows the call on
A (where it runs) and one on B. For each line: the delay from its print to its arrival at each
client. The difference is what following from another replica adds (docs/fleet.md). Bar (SPEC
§15): p50 on the other replica ≤ 100 ms.

The store's write load, in the same run: the same calls are first followed on A only (nobody
elsewhere: no live notices), then on A and B; for each half, the database's transactions
(``xact_commit``: reads count too), rows written and WAL bytes per call (``pg_stat_database``,
``pg_current_wal_lsn``). Following from another replica must not raise the rows written; its
notices add a transaction each (a commit record, no fsync) and the other replica's reads.

``--check``: exit 1 when the bar is missed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import running_postgres
from tests.support.server import start_serve, stop
from tests.support.skills import write_skill

from _common import SkipBench
from ongrid_skills.store import open_store
from ongrid_skills.types import Role

TICKER = """#!/bin/sh
cat >/dev/null
i=0
while [ $i -lt {lines} ]; do
  date +%s.%N >&2
  sleep {gap}
  i=$((i + 1))
done
echo '{{"ok": true}}'
"""


def follow(url: str, token: str, arrivals: list[float]) -> None:
    """Record, for each stderr event of the stream, arrival time minus the time in its line."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", url, headers=headers, timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("event: end"):
                return
            if line.startswith("data:"):
                now = time.time()
                data = json.loads(line[5:])
                if data.get("type") == "stderr":
                    arrivals.append(now - float(data["line"]))


TARGET_MS = 100.0


def write_load(url: str) -> tuple[int, int, int]:
    """The database's transactions, rows written (inserted + updated + deleted) and WAL position."""
    target = make_url(url)
    dsn = target.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted,"
            " pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_database WHERE datname = %s",
            (target.database,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def run_bench(
    calls: int = 5, lines: int = 30, gap: float = 0.1, flush_ms: int = 500
) -> dict[str, Any]:
    """Every figure: the delays on the replica running the call and on the other one (seconds),
    and the store's write load per call for each half."""
    if not (shutil.which("initdb") or glob.glob("/usr/lib/postgresql/*/bin/initdb")):
        raise SkipBench("no PostgreSQL server programs (initdb): apt-get install postgresql")
    load_start = os.getloadavg()[0]
    with running_postgres() as cluster, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = cluster.fresh_database()
        key = root / "audit.key"
        key.write_text("ab" * 32 + "\n")
        key.chmod(0o600)
        store = open_store(str(root / "setup"), url, audit_key_file=str(key))
        token, _ = store.tokens.create("bench", Role.OPERATOR)
        store.close()
        write_skill(root / "skills", "ticker", TICKER.format(lines=lines, gap=gap))
        env = {
            "ONGRID_DATABASE_URL": url,
            "ONGRID_AUDIT_KEY_FILE": str(key),
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(root / "skills"),
            "ONGRID_EVENT_FLUSH_MS": str(flush_ms),
        }
        a = start_serve(root / "a", env)
        b = start_serve(root / "b", env)
        here: list[float] = []
        there: list[float] = []
        loads: dict[str, tuple[float, float, float]] = {}
        try:
            for label, followers in (("followed on A only", (a,)), ("followed on A and B", (a, b))):
                time.sleep(2)  # the statistics collector settles
                before = write_load(url)
                for _ in range(calls):
                    started = httpx.post(
                        f"{a.url}/v1/skills/ticker/execute",
                        headers={"Authorization": f"Bearer {token}"},
                        json={"wait": False},
                        timeout=30,
                    ).json()
                    path = f"/v1/executions/{started['id']}/events"
                    threads = [
                        threading.Thread(
                            target=follow,
                            args=(r.url + path, token, here if r is a else there),
                        )
                        for r in followers
                    ]
                    for thread in threads:
                        thread.start()
                    for thread in threads:
                        thread.join()
                time.sleep(2)
                after = write_load(url)
                loads[label] = (
                    (after[0] - before[0]) / calls,
                    (after[1] - before[1]) / calls,
                    (after[2] - before[2]) / calls,
                )
        finally:
            stop(a)
            stop(b)
    p50_ms = statistics.median(there) * 1000
    return {
        "load": (load_start, os.getloadavg()[0]),
        "here": here,
        "there": there,
        "here_p50_ms": statistics.median(here) * 1000,
        "there_p50_ms": p50_ms,
        "there_p95_ms": percentile(there, 95) * 1000,
        "store": loads,
        "ok": p50_ms <= TARGET_MS,
    }


def report_lines(res: dict[str, Any]) -> list[str]:
    lines = [f"load average {res['load'][0]:.2f} → {res['load'][1]:.2f}"]
    for name, values in (
        ("the replica running the call", res["here"]),
        ("another replica", res["there"]),
    ):
        lines.append(
            f"{name:30} n={len(values):4}  p50 {statistics.median(values) * 1000:6.0f} ms"
            f"  p95 {percentile(values, 95) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"
        )
    for label, (commits, rows, wal) in res["store"].items():
        lines.append(
            f"store, {label:20}: {commits:5.1f} transactions, {rows:5.1f} rows written, "
            f"{wal / 1024:6.1f} KiB of WAL per call"
        )
    ok = "ok" if res["ok"] else "over"
    lines.append(f"other replica p50 {res['there_p50_ms']:.0f} ms: {ok} (≤ {TARGET_MS:.0f} ms)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--lines", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--flush-ms", type=int, default=500, help="ONGRID_EVENT_FLUSH_MS")
    parser.add_argument("--check", action="store_true", help="exit 1 when the bar is missed")
    options = parser.parse_args()
    res = run_bench(options.calls, options.lines, options.gap, options.flush_ms)
    print("\n".join(report_lines(res)))
    return 0 if res["ok"] or not options.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
