"""The spawn helper's library: found in its cache, built there with the system's ``cc`` when it is
missing, and loaded only when nobody but its owner (or root) could have written it.

Split from :mod:`ongrid_skills.execution.spawner`, which wraps what :func:`find` loads in a
:class:`~ongrid_skills.execution.spawner.HelperSpawner`. The library is built from ``SOURCES``
(``spawn_helper.c`` and ``call_helper.c``) with ``CFLAGS``, named by the hash of both and of the
flags, in the virtualenv (``<venv>/lib/ongrid-skills/``) or else the user's cache dir
(``~/.cache/ongrid-skills/``), or a private temp dir.

This module must never run anything but the compiler, nor load a library another user could
have written.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("spawn_helper.c")
SOURCES = (SOURCE, SOURCE.with_name("call_helper.c"))  # compiled into one library
CFLAGS = ("-O2", "-shared", "-fPIC", "-Wall")
ABI = 4
COMPILE_TIMEOUT_SECONDS = 60.0


def find() -> ctypes.CDLL | str:
    """The helper's library, loaded (built first when needed); or why it is unavailable."""
    if not sys.platform.startswith("linux"):
        return f"not built on {sys.platform}"
    digest = hashlib.sha256()
    for source in SOURCES:
        try:
            digest.update(source.read_bytes())
        except OSError as exc:
            return f"cannot read {source}: {exc.strerror or exc}"
    digest.update(" ".join((*CFLAGS, platform.machine())).encode())
    name = f"spawn-{digest.hexdigest()[:20]}.so"
    problems: list[str] = []
    for folder in cache_dirs():
        path = folder / name
        why = _safe_dir(folder)
        if why is not None:
            problems.append(why)
            continue
        if not path.exists():
            why = _build(path)
            if why is not None:
                problems.append(why)
                if why.startswith("compiling"):  # the source itself does not build here
                    break
                continue
        loaded = _load(path)
        if isinstance(loaded, ctypes.CDLL):
            return loaded
        problems.append(loaded)
    return "; ".join(problems) or "no cache directory"


def cache_dirs() -> list[Path]:
    """Where the compiled helper may live, in order of preference."""
    dirs: list[Path] = []
    if sys.prefix != sys.base_prefix:  # a virtualenv: the helper belongs to it
        dirs.append(Path(sys.prefix) / "lib" / "ongrid-skills")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(cache):
        dirs.append(Path(cache) / "ongrid-skills")
    dirs.append(Path(tempfile.gettempdir()) / f"ongrid-skills-{os.geteuid()}")
    return dirs


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid in (os.geteuid(), 0) and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _safe_dir(folder: Path) -> str | None:
    """Create ``folder`` (0700) if needed; None when it is ours alone, else why not."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode) or not _trusted(st):
        return f"{folder} is not a directory that only its owner can write"
    return None


def _build(target: Path) -> str | None:
    """Compile the helper into ``target`` (atomically); None on success, else why not."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return "no C compiler (cc) on PATH"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        proc = subprocess.run(
            [compiler, *CFLAGS, "-o", str(tmp), *map(str, SOURCES)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_SECONDS,
            check=False,
        )
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or ["no message"])[0]
            return f"compiling {SOURCE.name} failed: {first}"
        os.chmod(tmp, 0o700)
        os.replace(tmp, target)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot build {target}: {exc}"
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    for old in target.parent.glob("spawn-*.so"):  # builds of earlier sources
        if old != target:
            with contextlib.suppress(OSError):
                old.unlink()
    return None


def _load(path: Path) -> ctypes.CDLL | str:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or not _trusted(st):
            return f"{path} is not a regular file that only its owner can write"
        library = ctypes.CDLL(str(path))
        if library.ongrid_spawn_abi() != ABI:
            return f"{path} is not the expected helper"
        return library
    except (OSError, AttributeError) as exc:
        return f"cannot load {path}: {exc}"


__all__ = ["ABI", "CFLAGS", "SOURCE", "SOURCES", "cache_dirs", "find"]
