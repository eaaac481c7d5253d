"""Runner benchmark: one call and throughput of a trivial C skill, against the C floor.

Measured in one run, on the same child binary:

- the floor (``bench/c/floor.c``): posix_spawn + process group + 3 pipes + poll + waitpid, serial
  p50 per call, and calls/s with 1 and 2 parallel parent processes;
- ``SubprocessRunner.run``: p50 per call at concurrency 1, calls/s at concurrency 1..32;
- ``ongrid_skills.execute`` (args validation, gate, bookkeeping on top of the runner): the same.

Per-call latency comes from ``--blocks`` short serial blocks per side, the sides interleaved
(order rotated every block) so that noise from elsewhere on the machine hits them alike; each
side's figure is its best block p50 (the median block p50 is reported too). Throughput: every
level of every side, ``--sweep-reps`` times, rotated likewise; best per level.

The Python sides run on the event loop the commands run the runner on (``--loop commands``:
``ongrid_skills.doors.cli.eventloop``, uvloop where it is installed); ``--loop asyncio`` measures
them on asyncio's own loop, as an embedder of the Python API on that loop would run them.

Targets (SPEC §15): runner p50 ≤ 1.3× floor p50; runner best calls/s ≥ 0.7× floor best.

    .venv/bin/python bench/bench_runner.py [--blocks 8] [--block-calls 250] [--sweep-calls 600]
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
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

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
T = TypeVar("T")


@dataclass
class SideResult:
    """Figures of one side (floor, runner or execute) over every block of the run."""

    block_p50_us: list[float] = field(default_factory=list)
    block_p99_us: list[float] = field(default_factory=list)
    block_cpu_us: list[float] = field(default_factory=list)
    cps: dict[int, list[float]] = field(default_factory=dict)

    def add_serial(self, stats: dict[str, float], parent_cpu_us: float) -> None:
        self.block_p50_us.append(stats["p50_us"])
        self.block_p99_us.append(stats["p99_us"])
        self.block_cpu_us.append(parent_cpu_us)

    def add_rate(self, concurrency: int, cps: float) -> None:
        self.cps.setdefault(concurrency, []).append(cps)

    @property
    def p50_us(self) -> float:
        """Best (lowest) block p50: the figure compared, for every side alike."""
        return min(self.block_p50_us)

    @property
    def best_cps_by_concurrency(self) -> dict[int, float]:
        return {c: max(v) for c, v in self.cps.items()}

    @property
    def best_cps(self) -> float:
        return max(self.best_cps_by_concurrency.values())

    @property
    def best_concurrency(self) -> int:
        best = self.best_cps_by_concurrency
        return max(best, key=lambda c: best[c])

    def to_dict(self) -> dict[str, Any]:
        return {
            "p50_us": self.p50_us,
            "median_block_p50_us": statistics.median(self.block_p50_us),
            "median_block_p99_us": statistics.median(self.block_p99_us),
            "parent_cpu_us": statistics.median(self.block_cpu_us),
            "block_p50_us": self.block_p50_us,
            "cps_by_concurrency": self.best_cps_by_concurrency,
            "median_cps_by_concurrency": {c: statistics.median(v) for c, v in self.cps.items()},
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


def make_runner_call(tree: SkillTree, supervise: bool = True) -> Call:
    """One ``SubprocessRunner.run`` of the C child; raises unless it succeeded.

    ``supervise=False``: without the group record and sentinel (what the runner cost before)."""
    from ongrid_skills.execution.runner import SpawnSpec, SubprocessRunner

    spec = SpawnSpec(
        entry=tree.entry, root=tree.root, cwd=tree.folder, env={}, timeout_seconds=30.0
    )
    runner = SubprocessRunner(supervise=supervise)

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


class Side:
    """One thing measured: a serial block gives per-call stats, a rate gives calls/s."""

    name = ""
    levels: tuple[int, ...] = ()

    def __init__(self) -> None:
        self.result = SideResult()

    async def serial_block(self, calls: int) -> dict[str, float]:
        raise NotImplementedError

    async def rate(self, level: int, calls: int) -> float:
        raise NotImplementedError


class FloorSide(Side):
    """The C floor program; its levels are numbers of parallel parent processes."""

    name = "floor"
    levels = (1, 2)

    def __init__(self, binaries: CBinaries, tree: SkillTree) -> None:
        super().__init__()
        self.binaries, self.tree = binaries, tree

    def _run(self, calls: int, parents: int) -> dict[str, float]:
        child = Path(self.tree.entry)
        return run_floor(self.binaries, calls, parents=parents, child=child, cwd=self.tree.folder)

    async def serial_block(self, calls: int) -> dict[str, float]:
        rep = self._run(calls, 1)
        self.result.add_serial(rep, rep["parent_cpu_us"])
        return rep

    async def rate(self, level: int, calls: int) -> float:
        cps = self._run(calls, level)["calls_per_s"]
        self.result.add_rate(level, cps)
        return cps


class PythonSide(Side):
    """An async call of ours; its levels are numbers of concurrent asyncio workers."""

    def __init__(self, name: str, call: Call, levels: tuple[int, ...]) -> None:
        super().__init__()
        self.name, self.call, self.levels = name, call, levels

    async def serial_block(self, calls: int) -> dict[str, float]:
        stats, cpu = await serial(self.call, calls)
        self.result.add_serial(stats, cpu)
        return stats

    async def rate(self, level: int, calls: int) -> float:
        cps = await throughput(self.call, calls, level)
        self.result.add_rate(level, cps)
        return cps


@dataclass
class Options:
    block_calls: int = 250
    blocks: int = 8
    sweep_calls: int = 600
    sweep_reps: int = 3
    warmup: int = 200
    concurrencies: tuple[int, ...] = CONCURRENCIES
    execute: bool = True
    unsupervised: bool = False
    verbose: bool = True
    loop: str = "commands"  # the commands' loop (uvloop where installed), or asyncio, uvloop


def _rotated(sides: list[Side], r: int) -> list[Side]:
    k = r % len(sides)
    return sides[k:] + sides[:k]


async def _bench(binaries: CBinaries, tree: SkillTree, opts: Options) -> dict[str, Any]:
    sides: list[Side] = [
        FloorSide(binaries, tree),
        PythonSide("runner", make_runner_call(tree), opts.concurrencies),
    ]
    if opts.execute:
        sides.append(PythonSide("execute", make_execute_call(tree), opts.concurrencies))
    if opts.unsupervised:
        call = make_runner_call(tree, supervise=False)
        sides.append(PythonSide("unsupervised", call, opts.concurrencies))

    # Warm-up: page cache, dynamic loader, imports, the runner's first-use state, validators.
    for side in sides:
        await side.serial_block(opts.warmup)
        side.result = SideResult()

    # Per-call latency: short serial blocks, sides interleaved (order rotated every block), so
    # a burst of noise from elsewhere on the machine hits every side alike.
    for b in range(opts.blocks):
        line = []
        for side in _rotated(sides, b):
            stats = await side.serial_block(opts.block_calls)
            line.append(f"{side.name} {stats['p50_us']:.0f}")
        if opts.verbose:
            eprint(f"  serial block {b + 1}/{opts.blocks}: p50 µs", ", ".join(line))

    # Throughput: every level of every side, repeated, sides rotated every repetition.
    for r in range(opts.sweep_reps):
        for side in _rotated(sides, r):
            rates = [f"{lvl}:{await side.rate(lvl, opts.sweep_calls):.0f}" for lvl in side.levels]
            if opts.verbose:
                eprint(f"  sweep {r + 1}/{opts.sweep_reps} {side.name:8} calls/s by level", *rates)

    floor, runner = sides[0].result, sides[1].result
    by_name = {side.name: side.result for side in sides}
    out: dict[str, Any] = {
        "loop": type(asyncio.get_running_loop()).__module__.partition(".")[0],
        "block_calls": opts.block_calls,
        "blocks": opts.blocks,
        "sweep_calls": opts.sweep_calls,
        "sweep_reps": opts.sweep_reps,
        "floor": floor.to_dict(),
        "runner": runner.to_dict(),
        "runner_call_ratio": runner.p50_us / floor.p50_us,
        "runner_call_ratio_median": (
            runner.to_dict()["median_block_p50_us"] / floor.to_dict()["median_block_p50_us"]
        ),
        "runner_throughput_ratio": runner.best_cps / floor.best_cps,
    }
    out["runner_call_ok"] = out["runner_call_ratio"] <= TARGET_CALL_RATIO
    out["runner_throughput_ok"] = out["runner_throughput_ratio"] >= TARGET_THROUGHPUT_RATIO
    if opts.unsupervised:
        bare = by_name["unsupervised"].to_dict()
        out["unsupervised"] = bare
        out["supervision_p50_us"] = runner.p50_us - bare["p50_us"]
        out["supervision_median_p50_us"] = (
            runner.to_dict()["median_block_p50_us"] - bare["median_block_p50_us"]
        )
        out["supervision_cpu_us"] = runner.to_dict()["parent_cpu_us"] - bare["parent_cpu_us"]
        out["supervision_throughput_ratio"] = runner.best_cps / bare["best_cps"]
    if opts.execute:
        execute = by_name["execute"]
        out["execute"] = execute.to_dict()
        out["execute_call_ratio"] = execute.p50_us / floor.p50_us
        out["execute_throughput_ratio"] = execute.best_cps / floor.best_cps
        out["execute_minus_runner_us"] = execute.p50_us - runner.p50_us
    return out


def run_bench(opts: Options) -> dict[str, Any]:
    """Build the C floor, run every measurement, return the figures (raises SkipBench)."""
    binaries = build_c()
    with skill_tree(binaries) as tree:
        return run_on(opts.loop, _bench(binaries, tree, opts))


def run_on(loop: str, main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on ``loop``: ``commands`` is the loop the commands run the runner on
    (``ongrid_skills.doors.cli.eventloop``: uvloop where installed), ``asyncio`` asyncio's own,
    ``uvloop`` uvloop."""
    if loop == "commands":
        from ongrid_skills.doors.cli.eventloop import run_until_done

        return run_until_done(main)
    if loop == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def report_lines(res: dict[str, Any]) -> list[str]:
    """Human-readable summary of :func:`run_bench`'s figures."""
    floor, runner = res["floor"], res["runner"]

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    def side(name: str, d: dict[str, Any]) -> str:
        return (
            f"{name:9} p50 {d['p50_us']:.0f} µs (median block {d['median_block_p50_us']:.0f};"
            f" parent CPU {d['parent_cpu_us']:.0f} µs/call), best {d['best_cps']:.0f} calls/s"
            f" at level {d['best_concurrency']}"
        )

    lines = [
        f"(the Python sides on {res['loop']}'s event loop)",
        side("C floor", floor),
        side("runner", runner),
        f"  per call {res['runner_call_ratio']:.2f}× floor (median blocks"
        f" {res['runner_call_ratio_median']:.2f}×; target ≤ {TARGET_CALL_RATIO}×)"
        f" {verdict(res['runner_call_ok'])}",
        f"  throughput {res['runner_throughput_ratio']:.2f}× floor"
        f" (target ≥ {TARGET_THROUGHPUT_RATIO}×) {verdict(res['runner_throughput_ok'])}",
    ]
    if "execute" in res:
        lines += [
            side("execute", res["execute"]),
            f"  per call {res['execute_call_ratio']:.2f}× floor,"
            f" {res['execute_minus_runner_us']:+.0f} µs vs runner.run;"
            f" throughput {res['execute_throughput_ratio']:.2f}× floor",
        ]
    if "unsupervised" in res:
        lines += [
            side("unsupervised", res["unsupervised"]),
            f"  supervision costs {res['supervision_p50_us']:+.0f} µs p50 (median blocks"
            f" {res['supervision_median_p50_us']:+.0f} µs), {res['supervision_cpu_us']:+.0f} µs"
            f" parent CPU; throughput {res['supervision_throughput_ratio']:.3f}× unsupervised",
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

        run_on(opts.loop, go())


def parse_args(argv: list[str] | None) -> tuple[Options, argparse.Namespace]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--block-calls", type=int, default=Options.block_calls, help="calls per serial block"
    )
    p.add_argument("--blocks", type=int, default=Options.blocks, help="serial blocks per side")
    p.add_argument(
        "--sweep-calls", type=int, default=Options.sweep_calls, help="calls per throughput level"
    )
    p.add_argument(
        "--sweep-reps", type=int, default=Options.sweep_reps, help="repetitions of the sweep"
    )
    p.add_argument("--warmup", type=int, default=Options.warmup, help="warm-up calls")
    p.add_argument(
        "--concurrency",
        default=",".join(map(str, CONCURRENCIES)),
        help="comma-separated concurrency levels of the throughput sweep",
    )
    p.add_argument("--no-execute", action="store_true", help="skip ongrid_skills.execute")
    p.add_argument(
        "--unsupervised",
        action="store_true",
        help="also measure the runner without group record and sentinel, interleaved",
    )
    p.add_argument(
        "--loop",
        choices=("commands", "asyncio", "uvloop"),
        default=Options.loop,
        help="the event loop of the Python sides: the one the commands run on (default),"
        " asyncio's own, or uvloop",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--profile", type=int, metavar="N", help="cProfile N serial calls instead")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ns = p.parse_args(argv)
    opts = Options(
        block_calls=ns.block_calls,
        blocks=ns.blocks,
        sweep_calls=ns.sweep_calls,
        sweep_reps=ns.sweep_reps,
        warmup=ns.warmup,
        concurrencies=tuple(int(c) for c in ns.concurrency.split(",") if c.strip()),
        execute=not ns.no_execute,
        unsupervised=ns.unsupervised,
        loop=ns.loop,
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
