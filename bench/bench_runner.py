"""Runner benchmark: one call and throughput of a trivial C skill, against the C floor.

Measured in one run, on the same child binary, best of ``--rounds`` interleaved rounds:

- the floor (``bench/c/floor.c``): posix_spawn + process group + 3 pipes + poll + waitpid, serial
  p50 per call, and calls/s with 1 and 2 parallel parents;
- ``SubprocessRunner.run``: p50 per call at concurrency 1, calls/s at concurrency 1..32;
- ``ongrid_skills.execute`` (args validation, gate, bookkeeping on top of the runner): the same.

Targets (SPEC §15): runner p50 ≤ 1.3× floor p50; runner best calls/s ≥ 0.7× floor best.

    .venv/bin/python bench/bench_runner.py [--calls 2000] [--sweep-calls 1500] [--rounds 2]
    .venv/bin/python bench/bench_runner.py --profile 2000   # cProfile of the serial path
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    PAYLOAD,
    CBinaries,
    SkipBench,
    build_c,
    eprint,
    load_external_registry,
    run_floor,
    summarize_us,
)

CONCURRENCIES = (1, 2, 4, 8, 16, 32)
TARGET_CALL_RATIO = 1.3
TARGET_THROUGHPUT_RATIO = 0.7
SKILL_NAME = "c_child"

Call = Callable[[], Awaitable[None]]


@dataclass
class SideResult:
    """Figures of one side (floor, runner or execute), best over the rounds."""

    p50_us: float = float("inf")
    mean_us: float = float("inf")
    p99_us: float = float("inf")
    parent_cpu_us: float = float("inf")
    cps_by_concurrency: dict[int, float] = field(default_factory=dict)

    def add_serial(self, stats: dict[str, float], parent_cpu_us: float) -> None:
        if stats["p50_us"] < self.p50_us:
            self.p50_us = stats["p50_us"]
            self.mean_us = stats["mean_us"]
            self.p99_us = stats["p99_us"]
        self.parent_cpu_us = min(self.parent_cpu_us, parent_cpu_us)

    def add_rate(self, concurrency: int, cps: float) -> None:
        self.cps_by_concurrency[concurrency] = max(cps, self.cps_by_concurrency.get(concurrency, 0))

    @property
    def best_cps(self) -> float:
        return max(self.cps_by_concurrency.values())

    @property
    def best_concurrency(self) -> int:
        return max(self.cps_by_concurrency, key=lambda c: self.cps_by_concurrency[c])

    def to_dict(self) -> dict[str, Any]:
        return {
            "p50_us": self.p50_us,
            "mean_us": self.mean_us,
            "p99_us": self.p99_us,
            "parent_cpu_us": self.parent_cpu_us,
            "cps_by_concurrency": self.cps_by_concurrency,
            "best_cps": self.best_cps,
            "best_concurrency": self.best_concurrency,
        }


@dataclass
class SkillTree:
    """A temporary allow-list root holding one skill folder with a copy of the C child."""

    root: str
    folder: str
    entry: str


@contextmanager
def skill_tree(binaries: CBinaries) -> Iterator[SkillTree]:
    """Make ``<tmp>/c-child/{skill.json,child}`` (canonical paths); removed on exit."""
    root = os.path.realpath(tempfile.mkdtemp(prefix="ongrid-bench-runner-"))
    try:
        folder = os.path.join(root, "c-child")
        os.mkdir(folder)
        entry = os.path.join(folder, "child")
        shutil.copy2(binaries.child, entry)
        os.chmod(entry, 0o755)
        manifest = {
            "name": SKILL_NAME,
            "description": "Trivial C skill of the benchmarks: reads stdin, prints a JSON object.",
            "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "entry": "child",
        }
        with open(os.path.join(folder, "skill.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh)
        yield SkillTree(root=root, folder=folder, entry=entry)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _cpu_us() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1e6


def make_runner_call(tree: SkillTree) -> Call:
    """One ``SubprocessRunner.run`` of the C child; raises unless it succeeded."""
    from ongrid_skills.runner import SpawnSpec, SubprocessRunner

    spec = SpawnSpec(
        entry=tree.entry, root=tree.root, cwd=tree.folder, env={}, timeout_seconds=30.0
    )
    runner = SubprocessRunner()

    async def call() -> None:
        outcome = await runner.run(spec, PAYLOAD, on_event=None)
        if outcome.status != "succeeded" or not outcome.stdout:
            raise RuntimeError(f"runner call did not succeed: {outcome!r}")

    return call


def make_execute_call(tree: SkillTree) -> Call:
    """One ``ongrid_skills.execute`` of the C child skill; raises unless it succeeded."""
    import ongrid_skills

    logger = logging.getLogger("ongrid_skills")
    previous = logger.level
    logger.setLevel(logging.WARNING)
    try:
        registry = load_external_registry(tree.root)
    finally:
        logger.setLevel(previous)
    args = json.loads(PAYLOAD)

    async def call() -> None:
        execution = await ongrid_skills.execute(registry, SKILL_NAME, args)
        if execution.status != "succeeded":
            raise RuntimeError(f"execute did not succeed: {execution!r}")

    return call


async def serial(call: Call, calls: int) -> tuple[dict[str, float], float]:
    """Per-call timing stats at concurrency 1, and this process's CPU µs per call."""
    durations: list[int] = []
    cpu0 = _cpu_us()
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        await call()
        durations.append(time.perf_counter_ns() - t0)
    cpu = (_cpu_us() - cpu0) / calls
    return summarize_us(durations), cpu


async def throughput(call: Call, calls: int, concurrency: int) -> float:
    """Calls/s of ``calls`` calls made by ``concurrency`` workers sharing one counter."""
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return calls / (time.perf_counter() - t0)


def measure_floor(
    binaries: CBinaries, tree: SkillTree, calls: int, result: SideResult, verbose: bool
) -> None:
    child = Path(tree.entry)
    rep = run_floor(binaries, calls, parents=1, child=child, cwd=tree.folder)
    result.add_serial(rep, rep["parent_cpu_us"])
    result.add_rate(1, rep["calls_per_s"])
    rep2 = run_floor(binaries, calls, parents=2, child=child, cwd=tree.folder)
    result.add_rate(2, rep2["calls_per_s"])
    if verbose:
        eprint(
            f"  floor    p50 {rep['p50_us']:7.0f} µs  serial {rep['calls_per_s']:6.0f}/s"
            f"  2 parents {rep2['calls_per_s']:6.0f}/s"
        )


async def measure_side(
    name: str,
    *,
    call: Call,
    calls: int,
    sweep_calls: int,
    concurrencies: tuple[int, ...],
    result: SideResult,
    verbose: bool,
) -> None:
    stats, cpu = await serial(call, calls)
    result.add_serial(stats, cpu)
    rates = []
    for c in concurrencies:
        cps = await throughput(call, sweep_calls, c)
        result.add_rate(c, cps)
        rates.append(f"{c}:{cps:.0f}")
    if verbose:
        eprint(f"  {name:8} p50 {stats['p50_us']:7.0f} µs  calls/s by concurrency", *rates)


@dataclass
class Options:
    calls: int = 2000
    sweep_calls: int = 1500
    rounds: int = 2
    warmup: int = 200
    concurrencies: tuple[int, ...] = CONCURRENCIES
    execute: bool = True
    verbose: bool = True


async def _bench(binaries: CBinaries, tree: SkillTree, opts: Options) -> dict[str, Any]:
    floor, runner, execute = SideResult(), SideResult(), SideResult()
    runner_call = make_runner_call(tree)
    execute_call = make_execute_call(tree) if opts.execute else None

    # Warm-up: page cache, dynamic loader, imports, the event loop's child watcher, validators.
    run_floor(binaries, opts.warmup, child=Path(tree.entry), cwd=tree.folder)
    await throughput(runner_call, opts.warmup, 2)
    if execute_call is not None:
        await throughput(execute_call, opts.warmup, 2)

    for r in range(opts.rounds):
        if opts.verbose:
            eprint(f"round {r + 1}/{opts.rounds}")
        measure_floor(binaries, tree, opts.calls, floor, opts.verbose)
        await measure_side(
            "runner",
            call=runner_call,
            calls=opts.calls,
            sweep_calls=opts.sweep_calls,
            concurrencies=opts.concurrencies,
            result=runner,
            verbose=opts.verbose,
        )
        if execute_call is not None:
            await measure_side(
                "execute",
                call=execute_call,
                calls=opts.calls,
                sweep_calls=opts.sweep_calls,
                concurrencies=opts.concurrencies,
                result=execute,
                verbose=opts.verbose,
            )

    out: dict[str, Any] = {
        "calls": opts.calls,
        "sweep_calls": opts.sweep_calls,
        "rounds": opts.rounds,
        "floor": floor.to_dict(),
        "runner": runner.to_dict(),
        "runner_call_ratio": runner.p50_us / floor.p50_us,
        "runner_throughput_ratio": runner.best_cps / floor.best_cps,
    }
    out["runner_call_ok"] = out["runner_call_ratio"] <= TARGET_CALL_RATIO
    out["runner_throughput_ok"] = out["runner_throughput_ratio"] >= TARGET_THROUGHPUT_RATIO
    if execute_call is not None:
        out["execute"] = execute.to_dict()
        out["execute_call_ratio"] = execute.p50_us / floor.p50_us
        out["execute_throughput_ratio"] = execute.best_cps / floor.best_cps
        out["execute_minus_runner_us"] = execute.p50_us - runner.p50_us
    return out


def run_bench(opts: Options) -> dict[str, Any]:
    """Build the C floor, run every measurement, return the figures (raises SkipBench)."""
    binaries = build_c()
    with skill_tree(binaries) as tree:
        return asyncio.run(_bench(binaries, tree, opts))


def report_lines(res: dict[str, Any]) -> list[str]:
    """Human-readable summary of :func:`run_bench`'s figures."""
    floor, runner = res["floor"], res["runner"]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    lines = [
        f"C floor   p50 {floor['p50_us']:.0f} µs (parent CPU {floor['parent_cpu_us']:.0f} µs/call),"
        f" best {floor['best_cps']:.0f} calls/s ({floor['best_concurrency']} parent(s))",
        f"runner    p50 {runner['p50_us']:.0f} µs (parent CPU {runner['parent_cpu_us']:.0f}"
        f" µs/call), best {runner['best_cps']:.0f} calls/s at concurrency"
        f" {runner['best_concurrency']}",
        f"  per call {res['runner_call_ratio']:.2f}× floor (target ≤ {TARGET_CALL_RATIO}×)"
        f" {verdict(res['runner_call_ok'])}",
        f"  throughput {res['runner_throughput_ratio']:.2f}× floor"
        f" (target ≥ {TARGET_THROUGHPUT_RATIO}×) {verdict(res['runner_throughput_ok'])}",
    ]
    if "execute" in res:
        ex = res["execute"]
        lines += [
            f"execute   p50 {ex['p50_us']:.0f} µs (parent CPU {ex['parent_cpu_us']:.0f}"
            f" µs/call), best {ex['best_cps']:.0f} calls/s at concurrency"
            f" {ex['best_concurrency']}",
            f"  per call {res['execute_call_ratio']:.2f}× floor,"
            f" +{res['execute_minus_runner_us']:.0f} µs over runner.run;"
            f" throughput {res['execute_throughput_ratio']:.2f}× floor",
        ]
    return lines


def profile(opts: Options, calls: int, out: TextIO | None = None) -> None:
    """cProfile ``calls`` serial runner.run calls, then ``calls`` execute calls; print top 30."""
    binaries = build_c()
    with skill_tree(binaries) as tree:

        async def go() -> None:
            sides: list[tuple[str, Call]] = [("runner.run", make_runner_call(tree))]
            if opts.execute:
                sides.append(("ongrid_skills.execute", make_execute_call(tree)))
            for name, call in sides:
                await throughput(call, opts.warmup, 1)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(calls):
                    await call()
                prof.disable()
                stream = out or sys.stdout
                print(f"\n=== {name}: {calls} serial calls, by own time ===", file=stream)
                pstats.Stats(prof, stream=stream).sort_stats("tottime").print_stats(30)
                print(f"=== {name}: by cumulative time ===", file=stream)
                pstats.Stats(prof, stream=stream).sort_stats("cumulative").print_stats(40)

        asyncio.run(go())


def parse_args(argv: list[str] | None) -> tuple[Options, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--calls", type=int, default=Options.calls, help="serial calls per round")
    p.add_argument(
        "--sweep-calls", type=int, default=Options.sweep_calls, help="calls per concurrency level"
    )
    p.add_argument("--rounds", type=int, default=Options.rounds, help="rounds; best is kept")
    p.add_argument("--warmup", type=int, default=Options.warmup, help="warm-up calls")
    p.add_argument(
        "--concurrency",
        default=",".join(map(str, CONCURRENCIES)),
        help="comma-separated concurrency levels of the throughput sweep",
    )
    p.add_argument("--no-execute", action="store_true", help="skip ongrid_skills.execute")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--profile", type=int, metavar="N", help="cProfile N serial calls instead")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ns = p.parse_args(argv)
    opts = Options(
        calls=ns.calls,
        sweep_calls=ns.sweep_calls,
        rounds=ns.rounds,
        warmup=ns.warmup,
        concurrencies=tuple(int(c) for c in ns.concurrency.split(",") if c.strip()),
        execute=not ns.no_execute,
    )
    return opts, ns


def main(argv: list[str] | None = None) -> int:
    opts, ns = parse_args(argv)
    try:
        if ns.profile:
            profile(opts, ns.profile)
            return 0
        res = run_bench(opts)
    except SkipBench as exc:
        print(f"SKIPPED runner bench: {exc}")
        return 0
    if ns.json:
        print(json.dumps(res, indent=2))
    else:
        print("\n".join(report_lines(res)))
    missed = not (res["runner_call_ok"] and res["runner_throughput_ok"])
    return 1 if ns.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
