"""The private folder of one call's credential files: ``$CREDENTIALS_DIRECTORY`` (SPEC §18).

Where: ``ONGRID_CREDENTIALS_RUNTIME_DIR``, else ``/dev/shm`` (memory: a removed file leaves
nothing on a disk) when it is there, else the data dir. Under it, one folder per data dir and
user (``ongrid-credentials-<uid>-<data dir digest>``, 0700, refused when it is a link or someone
else's), then one per process (``<pid>-<start time>``) and one per call (its execution id):
0700, each file at its declared mode (0600 unless declared).

A call's folder is removed when the call ends, however it ends. A manager killed with -9 cannot
remove its folders: the next start of a process on the same data dir (:func:`sweep`) removes the
folders of every process that is no longer running.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat

from ongrid_skills.errors import ConfigError
from ongrid_skills.skills.credential_slots import FileInjection

SHM = "/dev/shm"  # a private folder under it, checked before use


def base_dir(runtime_dir: str | None, data_dir: str) -> str:
    """The folder of this data dir's call folders (not created here)."""
    parent = runtime_dir or (SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else data_dir)
    digest = hashlib.sha256(os.path.abspath(data_dir).encode()).hexdigest()[:12]
    return os.path.join(parent, f"ongrid-credentials-{os.getuid()}-{digest}")


def _private(path: str) -> None:
    """Create ``path`` 0700, or check that the one there is ours, a folder and private."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"{path} is not a folder of this user: refusing to put credentials there")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def _process_tag(pid: int) -> str | None:
    """``<pid>-<start time in ticks>`` of a running process, None when it is not running."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return f"{pid}-{int(fields[19])}"


def write(base: str, call_id: str, files: list[FileInjection]) -> str:
    """The call's folder with its files; the caller removes it with :func:`remove`."""
    os.makedirs(os.path.dirname(base), mode=0o700, exist_ok=True)
    _private(base)
    mine = os.path.join(base, _process_tag(os.getpid()) or str(os.getpid()))
    _private(mine)
    folder = os.path.join(mine, call_id)
    os.mkdir(folder, 0o700)
    try:
        for item in files:
            path = os.path.join(folder, item.path)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, item.content.encode())
                os.fchmod(fd, item.mode)
            finally:
                os.close(fd)
    except BaseException:
        remove(folder)
        raise
    return folder


def remove(folder: str) -> None:
    """Remove a call's folder and everything in it (nothing if it is gone)."""
    shutil.rmtree(folder, ignore_errors=True)


def sweep(base: str) -> int:
    """Remove the folders of processes that are no longer running; return how many."""
    try:
        names = os.listdir(base)
    except OSError:
        return 0
    removed = 0
    for name in names:
        pid, _, _start = name.partition("-")
        if pid.isdigit() and _process_tag(int(pid)) == name:
            continue  # a live process's (this one's, or another manager's on this data dir)
        remove(os.path.join(base, name))
        removed += 1
    return removed


__all__ = ["base_dir", "remove", "sweep", "write"]
