"""The packs folder of a data dir: installed versions, the active links, staging, the lock.

::

    $ONGRID_DATA_DIR/packs/
      .home                 the id of this packs folder in the store's records
      .lock                 flock: one change of installed packs at a time, across processes
      .staging/<pid>-…/     downloads and staging copies (same filesystem: renames are atomic)
      .active/<id>          → ../<id>/<version>: the active version (skills/packroots.py reads it)
      <id>/<version>/       the files of one installed version, read-only (a-w)

Every change of what is active is one system call on ``.active/``: a new link made beside the
old one and renamed over it (``switch``), or the link unlinked (``withdraw``); the folder is
fsynced after, so the switch itself is on disk when the change is recorded. Versions are placed
by renaming a staged folder into ``<id>/<version>``. This module moves and removes files only
under ``packs/``; it must never follow a link while deleting, nor touch a version some link
points to.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from ongrid_skills.errors import Conflict
from ongrid_skills.skills.packroots import ACTIVE_DIR, PACKS_DIR, active_versions

STAGING_DIR = ".staging"
HOME_FILE = ".home"
LOCK_FILE = ".lock"
#: How long a pack command waits for another one's change to finish.
LOCK_WAIT_SECONDS = 600.0
#: An installed folder: readable and searchable as the staged copy was (755), never writable.
READ_ONLY_DIR = 0o555


class PackHome:
    """The ``packs/`` folder of one data dir."""

    def __init__(self, data_dir: str, lock_wait: float = LOCK_WAIT_SECONDS) -> None:
        """``lock_wait``: how long :meth:`lock` waits by default (a command line waits long;
        an HTTP request should not hold a connection that long)."""
        self.data_dir = os.path.abspath(data_dir)
        self.lock_wait = lock_wait
        self.root = Path(self.data_dir) / PACKS_DIR
        self.active_dir = self.root / ACTIVE_DIR
        self.staging_dir = self.root / STAGING_DIR

    def ensure(self) -> None:
        """Create the folders (0700 for the packs folder: staging may hold a download)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.active_dir.mkdir(exist_ok=True)
        self.staging_dir.mkdir(mode=0o700, exist_ok=True)

    @property
    def home_id(self) -> str:
        """This folder's id in the records, made once (it moves with the data dir)."""
        self.ensure()
        path = self.root / HOME_FILE
        with contextlib.suppress(FileNotFoundError):
            text = path.read_text().strip()
            if text:
                return text
        fresh = secrets.token_hex(16)
        tmp = self.root / f".home.{os.getpid()}"
        tmp.write_text(fresh + "\n")
        try:
            os.link(tmp, path)  # first writer wins; a racing one reads the winner's id
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
        return path.read_text().strip()

    # ---- reading -------------------------------------------------------------------------
    def active(self) -> dict[str, str]:
        """``{pack id: active version}``."""
        return active_versions(self.data_dir)

    def version_dir(self, pack_id: str, version: str) -> Path:
        return self.root / pack_id / version

    def has_version(self, pack_id: str, version: str) -> bool:
        path = self.version_dir(pack_id, version)
        return path.is_dir() and not path.is_symlink()

    # ---- the lock ------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, wait: float | None = None) -> Iterator[None]:
        """Hold the packs lock; Conflict when another change holds it for longer than ``wait``
        seconds (default: this home's ``lock_wait``).

        An ``flock``: released by the kernel when the holder dies, however it dies.
        """
        self.ensure()
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + (self.lock_wait if wait is None else wait)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise Conflict(
                            "another pack change is in progress in this data dir"
                        ) from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)

    # ---- staging -------------------------------------------------------------------------
    def new_staging(self) -> Path:
        """A fresh folder for one command's downloads and copies, named after its process."""
        self.ensure()
        path = self.staging_dir / f"{os.getpid()}-{secrets.token_hex(4)}"
        path.mkdir(mode=0o700)
        return path

    def sweep_staging(self) -> None:
        """Remove the staging folders of processes that are gone (a crash, a kill -9)."""
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.staging_dir):
                pid = entry.name.split("-", 1)[0]
                if pid.isdigit() and (int(pid) == os.getpid() or _alive(int(pid))):
                    continue
                remove_tree(Path(entry.path))

    # ---- changes -------------------------------------------------------------------------
    def place(self, staged_root: Path, pack_id: str, version: str) -> Path:
        """Make ``staged_root`` read-only and rename it into ``<id>/<version>``."""
        target = self.version_dir(pack_id, version)
        target.parent.mkdir(mode=0o755, exist_ok=True)
        make_read_only(staged_root, top=False)
        os.rename(staged_root, target)  # refused if the target exists: never merged
        # The top folder last: renaming a folder into another one needs its write bit (for '..').
        os.chmod(target, READ_ONLY_DIR)
        _fsync_dir(target.parent)
        return target

    def switch(self, pack_id: str, version: str) -> None:
        """Make ``version`` the active one: one rename of a new link over the old one."""
        self.ensure()
        link = self.active_dir / pack_id
        tmp = self.active_dir / f".{pack_id}.{os.getpid()}.{secrets.token_hex(4)}"
        os.symlink(f"../{pack_id}/{version}", tmp)
        try:
            os.replace(tmp, link)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        _fsync_dir(self.active_dir)

    def withdraw(self, pack_id: str) -> None:
        """No version of ``pack_id`` is active any more: one unlink."""
        with contextlib.suppress(FileNotFoundError):
            (self.active_dir / pack_id).unlink()
        _fsync_dir(self.active_dir)

    def delete_version(self, pack_id: str, version: str) -> None:
        """Remove the files of a version no link points to (and its pack folder when empty)."""
        if self.active().get(pack_id) == version:
            raise Conflict(f"{pack_id}@{version} is active: its files stay")
        remove_tree(self.version_dir(pack_id, version))
        with contextlib.suppress(OSError):
            (self.root / pack_id).rmdir()  # only when empty


def make_read_only(root: Path, *, top: bool = True) -> None:
    """chmod a-w every file and folder under ``root`` (``root`` itself too when ``top``)."""
    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~0o222)
        for name in dirs:
            os.chmod(os.path.join(folder, name), READ_ONLY_DIR)
    if top:
        os.chmod(root, READ_ONLY_DIR)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and what it holds, read-only folders included; never through a link."""
    if path.is_symlink():
        path.unlink()
        return
    if not path.exists():
        return
    for folder, dirs, _files in os.walk(path):
        os.chmod(folder, 0o700)
        for name in dirs:
            sub = os.path.join(folder, name)
            if not os.path.islink(sub):
                os.chmod(sub, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
