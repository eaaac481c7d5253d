"""Replicas on PostgreSQL: how late a call's timeline reaches a client of another replica.

    .venv/bin/python bench/bench_replicas.py [--calls 5] [--lines 30] [--gap 0.1] [--flush-ms 500]

Starts a PostgreSQL server of its own (initdb, as the tests do: tests/support/postgres.py) and
two `ongrid-skills serve` replicas on one database. A skill on replica A prints a line to stderr
every ``--gap`` seconds, each holding the time it was printed; one SSE client follows the call on
A (where it runs) and one on B. For each line: the delay from its print to its arrival at each
client. The difference is what following from another replica adds (docs/fleet.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres import running_postgres
from tests.support.server import start_serve, stop
from tests.support.skills import write_skill

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


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--lines", type=int, default=30)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--flush-ms", type=int, default=500, help="ONGRID_EVENT_FLUSH_MS")
    options = parser.parse_args()
    with running_postgres() as cluster, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        url = cluster.fresh_database()
        key = root / "audit.key"
        key.write_text("ab" * 32 + "\n")
        key.chmod(0o600)
        store = open_store(str(root / "setup"), url, audit_key_file=str(key))
        token, _ = store.tokens.create("bench", Role.OPERATOR)
        store.close()
        write_skill(root / "skills", "ticker", TICKER.format(lines=options.lines, gap=options.gap))
        env = {
            "ONGRID_DATABASE_URL": url,
            "ONGRID_AUDIT_KEY_FILE": str(key),
            "ONGRID_SKILLS_EXTERNAL_DIRS": str(root / "skills"),
            "ONGRID_EVENT_FLUSH_MS": str(options.flush_ms),
        }
        a = start_serve(root / "a", env)
        b = start_serve(root / "b", env)
        here: list[float] = []
        there: list[float] = []
        try:
            for _ in range(options.calls):
                started = httpx.post(
                    f"{a.url}/v1/skills/ticker/execute",
                    headers={"Authorization": f"Bearer {token}"},
                    json={"wait": False},
                    timeout=30,
                ).json()
                path = f"/v1/executions/{started['id']}/events"
                threads = [
                    threading.Thread(target=follow, args=(a.url + path, token, here)),
                    threading.Thread(target=follow, args=(b.url + path, token, there)),
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
        finally:
            stop(a)
            stop(b)
    for name, values in (("the replica running the call", here), ("another replica", there)):
        print(
            f"{name:30} n={len(values):4}  p50 {statistics.median(values) * 1000:6.0f} ms"
            f"  p95 {percentile(values, 95) * 1000:6.0f} ms  max {max(values) * 1000:6.0f} ms"
        )


if __name__ == "__main__":
    main()
