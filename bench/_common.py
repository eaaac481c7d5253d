"""Shared helpers of the benchmarks: compiling the C floor, statistics, process accounting.

Nothing here imports ``ongrid_skills``: the floor side of every bench must work on its own.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
SRC_DIR = BENCH_DIR.parent / "src"
C_DIR = BENCH_DIR / "c"
BUILD_DIR = BENCH_DIR / ".build"
PAYLOAD = b'{"a":1}'


# Benchmark the working tree's package, installed (editable) or not.
if SRC_DIR.is_dir() and str(SRC_DIR) not in sys.path:
    sys.path.insert(0, str(SRC_DIR))


class SkipBench(Exception):
    """A bench cannot run on this machine (e.g. no C compiler); the message says why."""


@dataclass(frozen=True)
class CBinaries:
    floor: Path
    child: Path


def _needs_build(source: Path, target: Path) -> bool:
    return not target.exists() or target.stat().st_mtime < source.stat().st_mtime


def build_c() -> CBinaries:
    """Compile ``bench/c/*.c`` into ``bench/.build/`` with ``gcc -O2`` when sources changed."""
    binaries = CBinaries(floor=BUILD_DIR / "floor", child=BUILD_DIR / "child")
    pairs = [(C_DIR / "floor.c", binaries.floor), (C_DIR / "child.c", binaries.child)]
    stale = [(src, dst) for src, dst in pairs if _needs_build(src, dst)]
    if not stale:
        return binaries
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise SkipBench("no C compiler (gcc or cc) on PATH: the C floor cannot be built")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    for src, dst in stale:
        tmp = dst.with_suffix(".tmp")
        proc = subprocess.run(
            [gcc, "-O2", "-Wall", "-o", str(tmp), str(src)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SkipBench(f"compiling {src.name} failed:\n{proc.stderr}")
        tmp.replace(dst)
    return binaries


def run_floor(
    binaries: CBinaries, calls: int, parents: int = 1, child: Path | None = None, cwd: str = ""
) -> dict[str, float]:
    """Run the C floor program once and return its JSON report."""
    argv = [str(binaries.floor), "-p", str(parents)]
    if cwd:
        argv += ["-C", cwd]
    argv += [str(calls), str(child or binaries.child), PAYLOAD.decode()]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"floor failed ({proc.returncode}): {proc.stderr.strip()}")
    report: dict[str, float] = json.loads(proc.stdout)
    return report


def load_external_registry(root: str) -> Any:
    """``ongrid_skills.load_registry`` of ``root`` alone: no SKILL.md dirs, no bundled catalogue,
    no personas (whichever of these keyword arguments the current API has)."""
    import inspect

    import ongrid_skills

    kwargs: dict[str, Any] = {"external_dirs": [root]}
    params = inspect.signature(ongrid_skills.load_registry).parameters
    for name, value in (("native_dirs", []), ("persona_dirs", []), ("bundled", False)):
        if name in params:
            kwargs[name] = value
    return ongrid_skills.load_registry(**kwargs)


def external_count(registry: Any) -> int:
    """How many skills of a registry came from skill.json files (built-ins not counted)."""
    skills = getattr(registry, "skills", None)
    if skills is None:
        return len(registry)
    return sum(1 for s in skills.values() if getattr(s, "source", "external") == "external")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of ``values`` (q in 0..1), same rounding as floor.c."""
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


def summarize_us(durations_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99/min/mean in µs of per-call durations given in ns."""
    us = [d / 1000.0 for d in durations_ns]
    return {
        "p50_us": percentile(us, 0.5),
        "p90_us": percentile(us, 0.9),
        "p99_us": percentile(us, 0.99),
        "min_us": min(us),
        "mean_us": statistics.fmean(us),
    }


def open_fds() -> int:
    """Number of open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def child_processes(
    parent: int | None = None, ignore: frozenset[int] = frozenset()
) -> dict[str, int]:
    """Children of ``parent`` (default: this process) by state: ``zombies`` and ``alive``;
    the pids in ``ignore`` are not counted."""
    ppid = os.getpid() if parent is None else parent
    zombies = alive = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in ignore:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        # comm may contain spaces and parentheses: the fields follow the last ')'.
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) != ppid:
            continue
        if fields[0] == b"Z":
            zombies += 1
        else:
            alive += 1
    return {"zombies": zombies, "alive": alive}


def machine_line() -> str:
    """One line describing where the figures come from."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu or platform.machine()}), "
        f"{platform.system()} {platform.release()}, "
        f"CPython {platform.python_version()}"
    )


def code_version() -> str:
    """The commit benchmarked, and whether src/ had uncommitted changes."""
    repo = BENCH_DIR.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return f"commit {head}" + (" + uncommitted changes in src/" if dirty else "")


def load_average() -> float:
    """1-minute load average (other work on the machine skews every figure)."""
    return os.getloadavg()[0]


def eprint(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)
