"""CLI start-up benchmark: wall time of a command against the bare interpreter, in the same run.

The floor is ``python -c pass`` with this virtualenv's interpreter: what any Python command pays
before its first import of ours. Against it, in interleaved rounds (the order rotated every round,
so a burst of noise from elsewhere hits every side alike): ``ongrid-skills --version``,
``--help`` and ``list`` of examples/skills, each spawned as the console script (``posix_spawn``,
stdout and stderr to /dev/null) and reaped with ``wait4`` for its CPU time. Reported: median and
p90 of each, and each as "floor + X s" (median minus the floor's median).

Then which heavy modules (the server stack, the MCP and LLM SDKs, rich) each of ``--version``,
``--help``, ``list``, ``show``, ``validate`` and a local ``run`` imports, from
``python -X importtime``, with the time spent importing their modules.

Targets (issue 13): ``--version`` ≤ floor + 0.35 s, ``list`` of the examples ≤ floor + 0.6 s.

    .venv/bin/python bench/bench_cli_start.py [--repeat 20] [--json] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH_DIR, SkipBench, eprint, percentile

EXAMPLES = BENCH_DIR.parent / "examples" / "skills"
#: Seconds above the floor's median, by command (SPEC §15 names no bar; issue 13 does).
TARGETS = {"--version": 0.35, "list": 0.6}
HEAVY = (
    "fastapi",
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "starlette",
    "mcp",
    "openai",
    "anthropic",
    "rich",
)
#: Timed sides: label → arguments after the console script (None: the floor).
TIMED: dict[str, tuple[str, ...] | None] = {
    "floor": None,
    "--version": ("--version",),
    "--help": ("--help",),
    "list": ("list",),
}
#: Commands whose imports are listed.
IMPORTS: dict[str, tuple[str, ...]] = {
    "--version": ("--version",),
    "--help": ("--help",),
    "list": ("list",),
    "show": ("show", "host_info"),
    "validate": ("validate", str(EXAMPLES)),
    "run (local, safe)": ("run", "host_info", "{}"),
}
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \| *(\S+)$")


def console_script() -> str:
    """The ``ongrid-skills`` script beside this interpreter (the venv's), as a user runs it."""
    path = Path(sys.executable).parent / "ongrid-skills"
    if not path.exists():
        raise SkipBench(f"no {path}: run this bench with the virtualenv's python (make bench)")
    return str(path)


def environment(workdir: str) -> dict[str, str]:
    """No ONGRID_* from the caller's shell: the examples, the bundled catalogue, a data dir that
    does not exist (no local command needs one)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": workdir,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "ONGRID_SKILLS_EXTERNAL_DIRS": str(EXAMPLES),
        "ONGRID_DATA_DIR": os.path.join(workdir, "data"),
    }


def spawn_timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv`` in the current directory; it must exit 0."""
    quiet = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
    ]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=quiet)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime


def stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "p90": percentile(values, 0.9), "min": min(values)}


def time_commands(cli: str, env: dict[str, str], repeat: int) -> dict[str, Any]:
    """Interleaved rounds of every timed side; per side: wall and CPU stats."""
    argvs = {
        label: [sys.executable, "-c", "pass"] if args is None else [cli, *args]
        for label, args in TIMED.items()
    }
    labels = list(argvs)
    for label in labels:  # warm the page cache and the .pyc files
        spawn_timed(argvs[label], env)
    wall: dict[str, list[float]] = {label: [] for label in labels}
    cpu: dict[str, list[float]] = {label: [] for label in labels}
    for round_no in range(repeat):
        shift = round_no % len(labels)
        for label in labels[shift:] + labels[:shift]:
            w, c = spawn_timed(argvs[label], env)
            wall[label].append(w)
            cpu[label].append(c)
    floor = statistics.median(wall["floor"])
    sides: dict[str, Any] = {}
    for label in labels:
        side: dict[str, Any] = {"wall": stats(wall[label]), "cpu": stats(cpu[label])}
        if label != "floor":
            side["above_floor_s"] = side["wall"]["median"] - floor
            side["p90_above_floor_s"] = side["wall"]["p90"] - floor
            if label in TARGETS:
                side["target_above_floor_s"] = TARGETS[label]
                side["ok"] = side["above_floor_s"] <= TARGETS[label]
        sides[label] = side
    return sides


def heavy_imports(cli: str, args: tuple[str, ...], env: dict[str, str]) -> dict[str, float]:
    """Heavy packages imported by ``ongrid-skills ARGS`` → ms spent in their own modules (the
    sum of the self times of every module of the package: another package may import its
    submodules first, which the package's own cumulative line would miss)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", cli, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ongrid-skills {' '.join(args)} exited {done.returncode}")
    found: dict[str, float] = {}
    for line in done.stderr.splitlines():
        match = IMPORT_LINE.match(line)
        if match and (package := match.group(2).partition(".")[0]) in HEAVY:
            found[package] = found.get(package, 0.0) + int(match.group(1)) / 1000.0
    return found


def run_bench(repeat: int = 20) -> dict[str, Any]:
    cli = console_script()
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="ongrid-bench-cli-") as workdir:
        env = environment(workdir)
        os.chdir(workdir)  # posix_spawn has no cwd: nothing a command writes lands in the repo
        try:
            sides = time_commands(cli, env, repeat)
            imports = {label: heavy_imports(cli, args, env) for label, args in IMPORTS.items()}
        finally:
            os.chdir(here)
    return {"repeat": repeat, "sides": sides, "imports": imports}


def report_lines(res: dict[str, Any]) -> list[str]:
    sides = res["sides"]
    floor = sides["floor"]["wall"]
    lines = [
        f"CLI start, {res['repeat']} interleaved rounds (wall s; CPU s of the process)",
        f"  {'python -c pass (floor)':<26} median {floor['median']:.3f}   p90 {floor['p90']:.3f}"
        f"   cpu {sides['floor']['cpu']['median']:.3f}",
    ]
    for label, side in sides.items():
        if label == "floor":
            continue
        wall = side["wall"]
        verdict = ""
        if "ok" in side:
            verdict = f"   target ≤ +{side['target_above_floor_s']} s → " + (
                "met" if side["ok"] else "MISSED"
            )
        lines.append(
            f"  {'ongrid-skills ' + label:<26} median {wall['median']:.3f}   p90 {wall['p90']:.3f}"
            f"   cpu {side['cpu']['median']:.3f}   = floor + {side['above_floor_s']:.3f} s"
            f" (p90 + {side['p90_above_floor_s']:.3f}){verdict}"
        )
    lines.append("heavy packages imported (ms spent importing their modules):")
    for label, found in res["imports"].items():
        shown = ", ".join(f"{name} {ms:.0f}" for name, ms in sorted(found.items())) or "none"
        lines.append(f"  {label:<18} {shown}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeat", type=int, default=20, help="timed rounds (every side once each)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ns = p.parse_args(argv)
    if ns.repeat < 1:
        p.error("--repeat must be at least 1")
    try:
        res = run_bench(ns.repeat)
    except SkipBench as exc:
        eprint(f"SKIPPED: {exc}")
        return 0
    print(json.dumps(res, indent=2) if ns.json else "\n".join(report_lines(res)))
    missed = any(not side.get("ok", True) for side in res["sides"].values())
    return 1 if ns.strict and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
