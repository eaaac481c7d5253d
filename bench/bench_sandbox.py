"""Sandbox benchmark: what each profile adds to one call (SPEC §20), beside the plain runner.

Measured in one run, on the same trivial C child (``bench/c/child.c``) copied into a skill
folder, through one ``SubprocessRunner``:

- **floor**: the C floor program (``bench/c/floor.c``), serial p50;
- **plain**: the call without a profile (``none``: the spawn helper's plain clone);
- **strict**: the same call under ``strict`` (a Landlock ruleset of the system folders, the
  skill's folder, the devices and its temp dir; rlimits; no_new_privs; as root, a PID namespace
  and no capabilities), which also makes and removes the call's private temp dir;
- **host-read**: the same under ``host-read`` (a ruleset of every sibling of the protected paths,
  reused while the folders it lists do not change).

Each side is timed one call at a time (``perf_counter_ns``) in ``--blocks`` blocks of
``--block-calls`` calls, the sides interleaved block by block with the order rotated, so noise
from elsewhere hits them alike; each side's figure is its best block p50 (median block p50 also
reported). Target: strict p50 ≤ **1.15×** plain p50.

    .venv/bin/python bench/bench_sandbox.py [--blocks 6] [--block-calls 200] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import PAYLOAD, SkipBench, build_c, run_floor, summarize_us
from ongrid_skills.execution.confine import SandboxPolicy
from ongrid_skills.execution.landlock import abi
from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner
from ongrid_skills.execution.spawner import HelperSpawner, spawner
from ongrid_skills.skills.sandbox import SandboxSpec

TARGET_STRICT_RATIO = 1.15
SIDES = ("plain", "strict", "host-read")


async def _block(runner: SubprocessRunner, spec: SpawnSpec, calls: int) -> list[int]:
    took: list[int] = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        outcome = await runner.run(spec, PAYLOAD)
        took.append(time.perf_counter_ns() - start)
        if outcome.status.value != "succeeded":
            raise RuntimeError(f"{spec.sandbox}: {outcome.error} {outcome.stderr_tail}")
    return took


def run_bench(blocks: int = 6, block_calls: int = 200, warmup: int = 100) -> dict[str, Any]:
    if abi() < 4:
        raise SkipBench(f"Landlock ABI {abi()} here: the profiles need 4")
    if not isinstance(spawner("auto"), HelperSpawner):
        raise SkipBench("no spawn helper here: confined calls are refused")
    binaries = build_c()
    work = Path(tempfile.mkdtemp(prefix="ongrid-bench-sandbox-"))
    try:
        folder = work / "skills" / "child"
        folder.mkdir(parents=True)
        entry = folder / "run"
        shutil.copy2(binaries.child, entry)
        data = work / "data"
        data.mkdir()
        base = SpawnSpec(
            entry=str(entry),
            root=str(work / "skills"),
            cwd=str(folder),
            env={},
            timeout_seconds=30,
        )
        specs = {
            "plain": base,
            "strict": dataclasses.replace(base, sandbox=SandboxSpec("strict")),
            "host-read": dataclasses.replace(base, sandbox=SandboxSpec("host-read")),
        }
        runner = SubprocessRunner(sandbox=SandboxPolicy(protected=(str(data),)))
        per_side: dict[str, list[float]] = {side: [] for side in (*SIDES, "floor")}

        async def measure() -> None:
            for side in SIDES:
                await _block(runner, specs[side], warmup)
            for number in range(blocks):
                order = ["floor", *SIDES]
                order = order[number % len(order) :] + order[: number % len(order)]
                for side in order:
                    if side == "floor":
                        floor = run_floor(binaries, block_calls, cwd=str(folder))
                        per_side["floor"].append(floor["p50_us"])
                    else:
                        took = await _block(runner, specs[side], block_calls)
                        per_side[side].append(summarize_us(took)["p50_us"])

        asyncio.run(measure())
        runner.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {side: min(values) for side, values in per_side.items()}
    median = {side: statistics.median(values) for side, values in per_side.items()}
    ratios = {side: best[side] / best["plain"] for side in ("strict", "host-read")}
    return {
        "abi": abi(),
        "p50_us": best,
        "median_block_p50_us": median,
        "ratio_to_plain": ratios,
        "median_ratio_to_plain": {
            side: median[side] / median["plain"] for side in ("strict", "host-read")
        },
        "strict_ok": ratios["strict"] <= TARGET_STRICT_RATIO,
    }


def report_lines(r: dict[str, Any]) -> list[str]:
    p50, ratio, med = r["p50_us"], r["ratio_to_plain"], r["median_ratio_to_plain"]
    lines = [
        f"floor (C) {p50['floor']:,.0f} µs; plain runner {p50['plain']:,.0f} µs "
        f"({p50['plain'] / p50['floor']:.2f}× C)"
    ]
    for side in ("strict", "host-read"):
        lines.append(
            f"{side}: {p50[side]:,.0f} µs p50 = {ratio[side]:.2f}× plain "
            f"(median blocks {med[side]:.2f}×, +{p50[side] - p50['plain']:,.0f} µs)"
        )
    verdict = "ok" if r["strict_ok"] else "MISSED"
    lines.append(f"target strict ≤ {TARGET_STRICT_RATIO}× plain: {verdict}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--block-calls", type=int, default=200)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--json", action="store_true")
    ns = p.parse_args()
    try:
        result = run_bench(ns.blocks, ns.block_calls, ns.warmup)
    except SkipBench as exc:
        print(f"SKIPPED: {exc}")
        return 0
    print(json.dumps(result, indent=2) if ns.json else "\n".join(report_lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
