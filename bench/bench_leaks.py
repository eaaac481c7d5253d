"""Leak benchmark: many runner calls, then no zombie children and no growth of open fds.

The sentinel (the helper that kills the calls if this process dies) is a child that stays alive
on purpose; it is not counted.

Runs ``--calls`` (default 10,000) successful calls of the C child through
``SubprocessRunner.run`` at ``--concurrency`` (default 4), plus a few misbehaving ones (exit 3
with a stderr line; a 60 s sleep killed by a short timeout) so the failure and kill paths are
covered too. Open fds (``/proc/self/fd``) and children of this process (``/proc/*/stat``: state Z
= zombie, otherwise alive) are counted after a warm-up and at the end, inside the same event loop
and again after it closed. Any growth is a failure (exit status 1).

    .venv/bin/python bench/bench_leaks.py [--calls 10000] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PAYLOAD, SkipBench, build_c, child_processes, open_fds


@dataclass(frozen=True)
class Tree:
    root: str
    folder: str
    entry: str


@contextmanager
def child_tree(child: Path) -> Iterator[Tree]:
    root = os.path.realpath(tempfile.mkdtemp(prefix="ongrid-bench-leaks-"))
    try:
        folder = os.path.join(root, "c-child")
        os.mkdir(folder)
        entry = os.path.join(folder, "child")
        shutil.copy2(child, entry)
        os.chmod(entry, 0o755)
        yield Tree(root=root, folder=folder, entry=entry)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def sentinel_pid() -> int | None:
    """This process's sentinel: a child kept alive on purpose (it kills the calls if we die)."""
    from ongrid_skills.execution.supervision import supervision

    return supervision().sentinel_pid


def snapshot() -> dict[str, int]:
    sentinel = sentinel_pid()
    return {"fds": open_fds(), **child_processes(ignore=frozenset({sentinel} if sentinel else ()))}


async def _settle(expected: dict[str, int], deadline_s: float = 2.0) -> dict[str, int]:
    """Counts now; if above ``expected``, re-count until equal or the deadline (no fixed sleep)."""
    end = time.monotonic() + deadline_s
    snap = snapshot()
    while time.monotonic() < end and any(snap[k] > expected[k] for k in expected):
        await asyncio.sleep(0.01)
        snap = snapshot()
    return snap


async def _bench(tree: Tree, calls: int, concurrency: int, failing: int, timeouts: int) -> Any:
    from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

    ok_spec = SpawnSpec(
        entry=tree.entry, root=tree.root, cwd=tree.folder, env={}, timeout_seconds=30.0
    )
    fail_spec = SpawnSpec(
        entry=tree.entry,
        root=tree.root,
        cwd=tree.folder,
        env={"CHILD_MODE": "fail"},
        timeout_seconds=30.0,
    )
    sleep_spec = SpawnSpec(
        entry=tree.entry,
        root=tree.root,
        cwd=tree.folder,
        env={"CHILD_MODE": "sleep"},
        timeout_seconds=0.2,
    )
    runner = SubprocessRunner()
    statuses: dict[str, int] = {}

    async def run_many(spec: Any, n: int, want: str, conc: int) -> None:
        remaining = n

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                outcome = await runner.run(spec, PAYLOAD, on_event=None)
                statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
                if outcome.status != want:
                    raise RuntimeError(f"expected {want}, got {outcome!r}")

        await asyncio.gather(*(worker() for _ in range(min(conc, n))))

    # Warm-up: whatever the loop and the runner create once (watchers, pools) exists after this.
    await run_many(ok_spec, 200, "succeeded", concurrency)
    await run_many(fail_spec, 4, "failed", 2)
    await run_many(sleep_spec, 1, "timed_out", 1)
    before = snapshot()
    statuses.clear()

    t0 = time.perf_counter()
    await run_many(ok_spec, calls, "succeeded", concurrency)
    await run_many(fail_spec, failing, "failed", concurrency)
    await run_many(sleep_spec, timeouts, "timed_out", concurrency)
    elapsed = time.perf_counter() - t0
    after = await _settle(before)
    runner.close()  # as its owner (a manager, a worker) does when it stops
    return before, after, dict(statuses), elapsed


def run_bench(
    calls: int = 10_000, concurrency: int = 4, failing: int = 200, timeouts: int = 8
) -> dict[str, Any]:
    binaries = build_c()
    with child_tree(binaries.child) as tree:
        # Once per process, on the first spawn: the sentinel, its pipe and the call record;
        # with the first runner, the subreaper's list of children (kept open).
        from ongrid_skills.execution.reaper import OrphanReaper
        from ongrid_skills.execution.supervision import supervision

        supervision().record(None)
        OrphanReaper()
        outside_before = snapshot()
        before, after, statuses, elapsed = asyncio.run(
            _bench(tree, calls, concurrency, failing, timeouts)
        )
        outside_after = snapshot()
    leaks = {
        "fd_growth_in_loop": after["fds"] - before["fds"],
        "fd_growth_across_loop": outside_after["fds"] - outside_before["fds"],
        "zombies_after": max(after["zombies"], outside_after["zombies"]),
        "children_alive_after": max(after["alive"], outside_after["alive"]),
    }
    ok = (
        leaks["fd_growth_in_loop"] <= 0
        and leaks["fd_growth_across_loop"] <= 0
        and leaks["zombies_after"] == 0
        and leaks["children_alive_after"] == 0
    )
    return {
        "calls": sum(statuses.values()),
        "statuses": statuses,
        "concurrency": concurrency,
        "elapsed_s": elapsed,
        "in_loop": {"before": before, "after": after},
        "outside_loop": {"before": outside_before, "after": outside_after},
        **leaks,
        "sentinel": sentinel_pid(),
        "ok": ok,
    }


def report_lines(res: dict[str, Any]) -> list[str]:
    b, a = res["in_loop"]["before"], res["in_loop"]["after"]
    ob, oa = res["outside_loop"]["before"], res["outside_loop"]["after"]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(res["statuses"].items()))
    return [
        f"{res['calls']} calls ({statuses}) at concurrency {res['concurrency']}"
        f" in {res['elapsed_s']:.1f} s",
        f"open fds in the loop: {b['fds']} before, {a['fds']} after;"
        f" outside it: {ob['fds']} before, {oa['fds']} after",
        f"children: zombies {a['zombies']} (after loop {oa['zombies']}),"
        f" alive {a['alive']} (after loop {oa['alive']}), besides the sentinel ({res['sentinel']})",
        "no leak: PASS" if res["ok"] else "LEAK: FAIL",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", type=int, default=10_000, help="successful calls")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--failing", type=int, default=200, help="calls that exit 3")
    p.add_argument("--timeouts", type=int, default=8, help="calls killed by a 0.2 s timeout")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    ns = p.parse_args(argv)
    try:
        res = run_bench(ns.calls, ns.concurrency, ns.failing, ns.timeouts)
    except SkipBench as exc:
        print(f"SKIPPED leak bench: {exc}")
        return 0
    print(json.dumps(res, indent=2) if ns.json else "\n".join(report_lines(res)))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
