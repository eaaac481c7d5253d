"""Loader benchmark: ``load_registry`` on 1,000 and 10,000 external skills, against a bare floor.

The floor does the irreducible work on the same tree: an ``os.scandir`` walk (entries sorted by
name, depth first, symlinked directories not descended), read + ``json.loads`` of every
``skill.json``, and the containment check of its entry (``lstat``; ``realpath`` only when the entry
is a symlink; regular + executable). ``load_registry`` does that plus building and validating every
skill (names, fields, schema checks) and the registry itself.

Warm page cache, best of ``--repeat`` (default 3), floor and loader interleaved. The primary
figure is the first load in a fresh process (start-up: process-level caches such as compiled
validators start empty; imports are done beforehand on a 1-skill tree); a reload in a warm process
is reported too. Loader log lines are silenced (logger level WARNING) for the timed runs; one
extra run formats them into /dev/null to show their cost. Registry memory per skill is measured
in fresh subprocesses: tracemalloc (Python heap retained by the registry) and RSS delta after
``malloc_trim`` (also counts native memory).

Targets (SPEC §15): 10,000 skills ≤ 2× the floor; registry memory ≤ 5 KiB per skill.

    .venv/bin/python bench/bench_loader.py [--sizes 1000,10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import eprint, external_count, load_external_registry

TARGET_RATIO = 2.0
TARGET_KIB_PER_SKILL = 5.0
LOADER_LOGGER = "ongrid_skills.loader"
RUN_SH = "#!/bin/sh\ncat >/dev/null\necho '{\"ok\":true}'\n"
PER_GROUP = 100


def manifest(i: int) -> dict[str, Any]:
    """A realistic small manifest; the schema differs per skill (no cache hits by content)."""
    return {
        "name": f"bench_skill_{i:05d}",
        "description": f"Benchmark skill number {i}: pretends to clean a cache directory.",
        "schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": f"Root path to clean ({i})."},
                "dry_run": {"type": "boolean", "default": True},
                "max_files": {"type": "integer", "minimum": 1, "maximum": 1000 + i},
            },
            "required": ["path"],
        },
        "entry": "run.sh",
        "env_allow": ["PATH"],
        "timeout_seconds": 60,
        "class": "safe" if i % 3 else "mutating",
        "category": f"cat{i % 7}",
    }


def make_tree(root: str, count: int) -> None:
    """``root/gNNNN/sNNNNN/{skill.json,run.sh}`` for ``count`` skills, 100 per group folder."""
    for i in range(count):
        folder = os.path.join(root, f"g{i // PER_GROUP:04d}", f"s{i:05d}")
        os.makedirs(folder)
        with open(os.path.join(folder, "skill.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest(i), fh, indent=2)
        run_sh = os.path.join(folder, "run.sh")
        with open(run_sh, "w", encoding="utf-8") as fh:
            fh.write(RUN_SH)
        os.chmod(run_sh, 0o755)


@contextmanager
def temp_trees(sizes: list[int]) -> Iterator[dict[int, str]]:
    """One canonical temporary root per size (plus size 1 for warm-ups); removed on exit."""
    base = os.path.realpath(tempfile.mkdtemp(prefix="ongrid-bench-loader-"))
    try:
        roots: dict[int, str] = {}
        for size in sorted({1, *sizes}):
            root = os.path.join(base, f"skills-{size}")
            os.mkdir(root)
            make_tree(root, size)
            roots[size] = root
        yield roots
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def floor_load(root: str) -> list[tuple[str, str]]:
    """The bare floor: walk + read + parse + containment. Returns (name, entry) pairs."""
    root = os.path.realpath(root)
    found: list[tuple[str, str]] = []

    def walk(directory: str) -> None:
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                walk(e.path)
            elif e.name == "skill.json":
                try:
                    with open(e.path, "rb") as fh:
                        obj = json.loads(fh.read())
                    entry = os.path.normpath(os.path.join(directory, obj["entry"]))
                    if not _within(entry, root):
                        continue
                    st = os.lstat(entry)
                    if stat.S_ISLNK(st.st_mode):
                        entry = os.path.realpath(entry)
                        if not _within(entry, root):
                            continue
                        st = os.stat(entry)
                    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
                        found.append((obj["name"], entry))
                except (OSError, ValueError, KeyError, TypeError):
                    continue

    walk(root)
    return found


def load_registry(root: str) -> Any:
    return load_external_registry(root)


@contextmanager
def loader_logging(mode: str) -> Iterator[None]:
    """``quiet``: loader logger at WARNING. ``devnull``: INFO lines formatted into /dev/null."""
    logger = logging.getLogger(LOADER_LOGGER)
    parent = logging.getLogger("ongrid_skills")
    saved = (logger.level, parent.level, logger.propagate)
    handler: logging.Handler | None = None
    sink = None
    try:
        if mode == "quiet":
            logger.setLevel(logging.WARNING)
        else:
            sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
            handler = logging.StreamHandler(sink)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        yield
    finally:
        logger.setLevel(saved[0])
        parent.setLevel(saved[1])
        logger.propagate = saved[2]
        if handler is not None:
            logger.removeHandler(handler)
        if sink is not None:
            sink.close()


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def time_child(kind: str, root: str, warm_root: str) -> dict[str, Any]:
    """In a fresh process: one timed ``floor`` walk or ``load`` / ``load-logged`` registry load.

    The 1-skill ``warm_root`` is loaded first, so imports and first-use module state are not
    counted; process-level caches (compiled validators, ...) start empty, as at start-up.
    """
    found = 0

    def go() -> None:
        nonlocal found
        found = len(floor_load(root)) if kind == "floor" else external_count(load_registry(root))

    with loader_logging("quiet"):
        _ = floor_load(warm_root) if kind == "floor" else load_registry(warm_root)
    with loader_logging("devnull" if kind == "load-logged" else "quiet"):
        seconds = _timed(go)
    return {"skills": found, "seconds": seconds}


def _spawn_child(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed: {proc.stderr.strip()[-2000:]}")
    rep: dict[str, Any] = json.loads(proc.stdout)
    return rep


def time_size(root: str, warm_root: str, size: int, repeat: int) -> dict[str, Any]:
    """Floor vs load_registry on one tree, warm page cache, best of ``repeat``.

    Primary figures: the first load in a fresh process (what start-up costs), floor and loader
    interleaved. Also the best in-process repeat (a reload in a long-running manager).
    """
    with loader_logging("quiet"):
        floor_n = len(floor_load(root))  # warms the page cache and the dentry cache
        reg_n = external_count(load_registry(root))
    if floor_n != size or reg_n != size:
        raise RuntimeError(f"expected {size} skills, floor found {floor_n}, loader {reg_n}")
    fresh_floor = fresh_load = float("inf")
    for _ in range(repeat):
        for kind in ("floor", "load"):
            rep = _spawn_child(kind, root, warm_root)
            if rep["skills"] != size:
                raise RuntimeError(f"{kind} child found {rep['skills']} skills, not {size}")
            if kind == "floor":
                fresh_floor = min(fresh_floor, rep["seconds"])
            else:
                fresh_load = min(fresh_load, rep["seconds"])
    logged = _spawn_child("load-logged", root, warm_root)["seconds"]
    warm_floor = warm_load = float("inf")
    with loader_logging("quiet"):
        for _ in range(repeat):
            warm_floor = min(warm_floor, _timed(lambda: floor_load(root)))
            warm_load = min(warm_load, _timed(lambda: load_registry(root)))
    ratio = fresh_load / fresh_floor
    return {
        "skills": size,
        "floor_ms": fresh_floor * 1e3,
        "load_ms": fresh_load * 1e3,
        "ratio": ratio,
        "ok": ratio <= TARGET_RATIO,
        "load_logged_ms": logged * 1e3,
        "reload_floor_ms": warm_floor * 1e3,
        "reload_ms": warm_load * 1e3,
        "reload_ratio": warm_load / warm_floor,
    }


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    gc.collect()
    name = ctypes.util.find_library("c")
    if name:
        try:
            libc = ctypes.CDLL(name)
            if hasattr(libc, "malloc_trim"):
                libc.malloc_trim(0)
        except OSError:
            pass


def memory_child(root: str, warm_root: str, how: str) -> dict[str, Any]:
    """In a fresh process: bytes retained by a registry of ``root`` (``tracemalloc`` or ``rss``)."""
    with loader_logging("quiet"):
        warm = load_registry(warm_root)  # imports, lazy module state, first-use caches
        del warm
        _trim()
        if how == "tracemalloc":
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            registry = load_registry(root)
            gc.collect()
            used = tracemalloc.get_traced_memory()[0] - base
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
        else:
            before = _rss_bytes()
            registry = load_registry(root)
            _trim()
            used = _rss_bytes() - before
            peak = used
    n = external_count(registry)
    return {"skills": n, "bytes": used, "peak_bytes": peak}


def measure_memory(root: str, warm_root: str) -> dict[str, Any]:
    """Registry bytes per skill for ``root``, by tracemalloc and by RSS, each in a fresh process."""
    out: dict[str, Any] = {}
    for how in ("tracemalloc", "rss"):
        rep = _spawn_child(how, root, warm_root)
        out[f"{how}_kib_per_skill"] = rep["bytes"] / rep["skills"] / 1024
        out[f"{how}_peak_kib_per_skill"] = rep["peak_bytes"] / rep["skills"] / 1024
        out["skills"] = rep["skills"]
    worst = max(out["tracemalloc_kib_per_skill"], out["rss_kib_per_skill"])
    out["kib_per_skill"] = worst
    out["ok"] = worst <= TARGET_KIB_PER_SKILL
    return out


def run_bench(sizes: list[int], repeat: int, memory: bool = True) -> dict[str, Any]:
    """Generate the trees, time every size, measure memory on the largest one."""
    t0 = time.perf_counter()
    with temp_trees(sizes) as roots:
        made = time.perf_counter() - t0
        eprint(f"  generated trees {sizes} in {made:.1f} s")
        timings = []
        for size in sizes:
            row = time_size(roots[size], roots[1], size, repeat)
            eprint("  " + report_row(row))
            timings.append(row)
        res: dict[str, Any] = {"repeat": repeat, "sizes": timings}
        if memory:
            biggest = max(sizes)
            res["memory"] = measure_memory(roots[biggest], roots[1])
    return res


def report_row(row: dict[str, Any]) -> str:
    verdict = "PASS" if row["ok"] else "MISS"
    return (
        f"{row['skills']:>6} skills, fresh process: floor {row['floor_ms']:.1f} ms,"
        f" load_registry {row['load_ms']:.1f} ms = {row['ratio']:.2f}×"
        f" (target ≤ {TARGET_RATIO}×) {verdict}; with log lines {row['load_logged_ms']:.1f} ms;"
        f" reload in a warm process {row['reload_ms']:.1f} ms vs floor"
        f" {row['reload_floor_ms']:.1f} ms = {row['reload_ratio']:.2f}×"
    )


def report_lines(res: dict[str, Any]) -> list[str]:
    lines = [report_row(row) for row in res["sizes"]]
    mem = res.get("memory")
    if mem:
        verdict = "PASS" if mem["ok"] else "MISS"
        lines.append(
            f"registry memory, {mem['skills']} skills:"
            f" {mem['tracemalloc_kib_per_skill']:.2f} KiB/skill"
            f" (tracemalloc; peak while loading {mem['tracemalloc_peak_kib_per_skill']:.2f}),"
            f" {mem['rss_kib_per_skill']:.2f} KiB/skill (RSS delta)"
            f" (target ≤ {TARGET_KIB_PER_SKILL} KiB) {verdict}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000,10000", help="comma-separated numbers of skills")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per side; best is kept")
    p.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    p.add_argument(
        "--child", nargs=3, metavar=("KIND", "ROOT", "WARM_ROOT"), help=argparse.SUPPRESS
    )
    ns = p.parse_args(argv)
    if ns.child:
        kind, root, warm_root = ns.child
        if kind in ("tracemalloc", "rss"):
            print(json.dumps(memory_child(root, warm_root, kind)))
        else:
            print(json.dumps(time_child(kind, root, warm_root)))
        return 0
    sizes = [int(s) for s in ns.sizes.split(",") if s.strip()]
    res = run_bench(sizes, ns.repeat, memory=not ns.no_memory)
    print(json.dumps(res, indent=2) if ns.json else "\n".join(report_lines(res)))
    missed = not all(row["ok"] for row in res["sizes"]) or not res.get("memory", {}).get("ok", True)
    return 1 if ns.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
