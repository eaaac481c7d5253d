"""What the built-ins may reach: the readable roots, the manager's own files never, the network.

A :class:`Reach` travels in every :class:`~ongrid_skills.builtins.base.BuiltinContext`; the
manager builds it once from the settings (:meth:`Reach.from_settings`). A bare ``Reach()`` has
the defaults: files under ``/var/log`` only, the probes' always-denied targets only.

**Protected files** are refused to every built-in, whatever the readable roots say, after every
symlink is resolved: the data dir (database, tokens, keys, lock), the settings file and any other
file a ``*_file`` setting names, the database file when it lives elsewhere
(``ONGRID_DATABASE_URL=sqlite:///…``), and every store file this process opened
(:func:`ongrid_skills.paths.store_files`). Besides the path, a file's identity
(device, inode) is compared with theirs, so a hard link or a bind mount of the database is
refused too. This module never opens a protected file, even to look: SQLite's locks belong to the
process, and one ``close()`` of the database anywhere in it drops them.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field, fields

from ongrid_skills.builtins.failures import ForbiddenPath
from ongrid_skills.builtins.netrules import NetRules
from ongrid_skills.paths import SQLITE_COMPANIONS, is_within, store_files
from ongrid_skills.settings import DEFAULT_READ_PATHS, Settings

__all__ = ["Reach", "sqlite_file"]

_SQLITE_URL = re.compile(r"^sqlite(?:\+\w+)?:///(?P<path>[^?]*)")


def sqlite_file(url: str | None) -> str | None:
    """The database file of a ``sqlite:///…`` URL (absolute), None for anything else.

    >>> sqlite_file("sqlite:////srv/ongrid/state.db?timeout=5")
    '/srv/ongrid/state.db'
    >>> sqlite_file("postgresql://db/ongrid") is None
    True
    """
    match = _SQLITE_URL.match(url or "")
    if match is None or match["path"] in ("", ":memory:"):
        return None
    return os.path.abspath(match["path"])


@dataclass(frozen=True, slots=True)
class Reach:
    """``read_roots``: where the file built-ins may read; ``protected``: paths (files or dirs)
    they never touch; ``net``: the probes' network rules."""

    read_roots: tuple[str, ...] = DEFAULT_READ_PATHS
    protected: tuple[str, ...] = ()
    net: NetRules = field(default_factory=NetRules)

    @classmethod
    def from_settings(cls, settings: Settings) -> Reach:
        """The operator's reach; a malformed network entry is a ConfigError."""
        protected = [os.path.abspath(settings.data_dir)]
        # Every file a setting names (``config_file``, key files…) is the manager's own.
        for spec in fields(settings):
            value = getattr(settings, spec.name)
            if spec.name.endswith("_file") and isinstance(value, str) and value:
                protected.append(os.path.abspath(value))
        sink = settings.audit_sink
        if sink and not sink.startswith("syslog"):  # the audit sink file: the chain's witness
            protected.append(os.path.abspath(sink))
        database = sqlite_file(settings.database_url)
        if database:
            protected.extend(database + suffix for suffix in SQLITE_COMPANIONS)
        return cls(
            read_roots=tuple(os.path.abspath(root) for root in settings.builtin_read_paths),
            protected=tuple(protected),
            net=NetRules.parse(
                allow=settings.builtin_net_allow,
                deny=settings.builtin_net_deny,
                body_allow=settings.builtin_http_body_allow,
            ),
        )

    # ---- paths -------------------------------------------------------------------------------
    def _protected_paths(self) -> list[str]:
        # Resolved at each check, not once: the data dir may be created (or re-linked) later.
        return [os.path.realpath(p) for p in (*self.protected, *store_files())]

    def is_protected(self, real: str) -> bool:
        """Whether the canonical path ``real`` is, or lies inside, one of the protected paths."""
        return any(is_within(real, p) for p in self._protected_paths())

    def readable_roots(self) -> list[str]:
        return [os.path.realpath(root) for root in self.read_roots]

    def check_path(self, path: str, real: str, *, mount_points: bool = False) -> None:
        """Raise ForbiddenPath unless the canonical ``real`` (of ``path``) may be looked at.

        ``mount_points``: a file system's mount point is allowed even outside the roots (what
        ``disk_usage`` measures; mount points are public in ``/proc/mounts``)."""
        if self.is_protected(real):
            raise ForbiddenPath(
                f"{path} is refused: the manager's own files (data dir, database, settings) "
                "are never read by built-ins"
            )
        roots = self.readable_roots()
        if any(is_within(real, root) for root in roots):
            return
        if mount_points and os.path.ismount(real):
            return
        shown = ", ".join(self.read_roots) or "none"
        raise ForbiddenPath(f"{path} is outside the readable roots (builtin_read_paths: {shown})")

    def check_identity(self, path: str, st: os.stat_result) -> None:
        """Raise ForbiddenPath when ``st`` is a protected file under another name (a hard link,
        a bind mount). Protected paths are only ``stat``-ed here, never opened."""
        identity = (st.st_dev, st.st_ino)
        for protected in self._protected_paths():
            try:
                pst = os.stat(protected)
            except OSError:
                continue
            if (pst.st_dev, pst.st_ino) == identity:
                raise ForbiddenPath(f"{path} is refused: it is one of the manager's own files")
            if stat.S_ISDIR(pst.st_mode) and pst.st_dev == st.st_dev:
                try:
                    entries = list(os.scandir(protected))
                except OSError:
                    continue
                for entry in entries:
                    try:
                        est = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if (est.st_dev, est.st_ino) == identity:
                        raise ForbiddenPath(
                            f"{path} is refused: it is one of the manager's own files"
                        )
