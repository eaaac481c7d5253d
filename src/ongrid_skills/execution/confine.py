"""Sandbox profiles enforced (SPEC §20, docs/security.md): what one confined call is given.

:class:`SandboxPolicy` holds the operator's side (a default profile per class, whether a skill
may loosen it, the limits, the protected paths); :meth:`SandboxPolicy.plan` turns a call's
effective profile into a :class:`Confinement`: a Landlock ruleset, the rlimits, the private
temp dir, and the ``conf`` words the spawn helper's confined path reads (``spawn_helper.c``).

Who enforces what:

- **Landlock** (in the child, before ``execve``): which files the call reads, runs and writes;
  TCP bind/connect when ``network`` is false (ABI ≥ 4); signals and abstract Unix sockets
  outside the call (ABI ≥ 6); ptrace and ``/proc/<pid>/environ|mem`` of any process outside it.
- **no_new_privs**: a setuid or file-capability binary runs with the caller's ids.
- **rlimits**: address space (``RLIMIT_AS``), file size (``RLIMIT_FSIZE``), open files
  (``RLIMIT_NOFILE``); processes by ``RLIMIT_NPROC`` when the manager is not root (the kernel
  never applies it to uid 0), and as root by a PID namespace of its own whose ``pid_max`` caps
  the call's processes (the kernel's floor is 301).

A profile that cannot be enforced here raises :class:`~ongrid_skills.errors.SandboxUnavailable`
with the reason; the call is then refused, never run unconfined.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ongrid_skills.errors import SandboxUnavailable
from ongrid_skills.execution import landlock
from ongrid_skills.settings import Settings
from ongrid_skills.skills.sandbox import NONE, STRICT, SandboxSpec, effective

#: What a strict call may read (and run) besides its own folder: the system's programs and
#: libraries, and the few files of /etc that the C library and TLS read.
SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: Never readable by a confined call, whatever it declares.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
DEFAULT_MEMORY_MB = 4096
DEFAULT_PROCESSES = 512
DEFAULT_FILE_SIZE_MB = 1024
DEFAULT_OPEN_FILES = 1024
PID_MAX_FLOOR = 301  # the kernel refuses a smaller pid_max
_NO_NEW_PRIVS, _NEW_PIDNS, _DROP_CAPS = 1, 2, 4
#: Entries of /proc that are processes (their environment, memory, files): never readable.
_PROC_SELF = ("self", "thread-self")


@dataclass(slots=True)
class Confinement:
    """One call's confinement: give ``conf`` to the spawn helper, ``env`` to the child, then
    :meth:`close` (the ruleset) and, once the call ended, :meth:`release` (the temp dir)."""

    profile: str
    conf: tuple[int, ...]
    env: dict[str, str]
    ruleset: landlock.Ruleset | None
    temp_dir: str | None

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()
            self.ruleset = None

    def release(self) -> None:
        self.close()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None


@dataclass(slots=True)
class SandboxPolicy:
    """The operator's side of sandboxing (from settings; the default is today's behaviour)."""

    defaults: Mapping[str, str] = field(default_factory=dict)  # class -> profile
    may_loosen: bool = False
    protected: tuple[str, ...] = ()  # the data dir, the keys, the credentials' folders
    memory_mb: int = DEFAULT_MEMORY_MB
    processes: int = DEFAULT_PROCESSES
    file_size_mb: int = DEFAULT_FILE_SIZE_MB
    open_files: int = DEFAULT_OPEN_FILES
    temp_root: str | None = None
    _host_rules: (
        tuple[tuple[str, ...], tuple[tuple[str, int], ...], list[tuple[str, int]]] | None
    ) = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxPolicy:
        """The operator's policy: the defaults per class and limits of ``settings``; protected,
        the data dir, every key file, and the folders of the calls' credentials."""
        protected = [settings.data_dir, "/dev/shm"]
        for path in (
            settings.audit_key_file,
            settings.credentials_key_file,
            settings.fleet_key_file,
            settings.credentials_runtime_dir,
        ):
            if path:
                protected.append(path)
        return cls(
            defaults={
                "safe": settings.sandbox_default_safe,
                "mutating": settings.sandbox_default_mutating,
                "dangerous": settings.sandbox_default_dangerous,
            },
            may_loosen=settings.sandbox_skills_may_loosen,
            protected=tuple(os.path.abspath(p) for p in protected),
            memory_mb=settings.sandbox_memory_mb,
            processes=settings.sandbox_processes,
        )

    def resolve(self, declared: SandboxSpec | None, skill_class: str) -> SandboxSpec:
        """The profile a call of this class with this declaration runs under."""
        return effective(declared, self.defaults.get(skill_class, NONE), may_loosen=self.may_loosen)

    def plan(
        self,
        spec: SandboxSpec,
        *,
        folder: str,
        entry: str,
        extra_read: Iterable[str] = (),
        credentials_dir: str | None = None,
    ) -> Confinement | None:
        """The confinement of one call (None for ``none``); raises SandboxUnavailable."""
        if spec.profile == NONE:
            return None
        version = landlock.abi()
        if version < 1:
            raise SandboxUnavailable(
                f"profile {spec.profile} needs Linux Landlock, which this kernel does not offer "
                "(or it is disabled: lsm= on the kernel command line)"
            )
        if not spec.network and version < 4:
            raise SandboxUnavailable(
                f"network: false needs Landlock ABI 4 (TCP rules); this kernel has ABI {version}"
            )
        protected = self._protected()
        for path in (folder, *spec.read, *spec.write, *extra_read):
            if _process_entry(path):
                raise SandboxUnavailable(
                    f"profile {spec.profile}: {path} holds other processes' environments and "
                    "memory, which no confined call may read"
                )
            clash = _overlap(os.path.realpath(path), protected)
            if clash is not None:
                raise SandboxUnavailable(
                    f"profile {spec.profile}: {path} would expose {clash}, which no confined call "
                    "may read"
                )
        temp_dir = self._temp_dir()
        ruleset: landlock.Ruleset | None = None
        try:
            ruleset = landlock.Ruleset(network=spec.network)
            if spec.profile == STRICT:
                for path in (*SYSTEM_READ, *spec.read, *extra_read):
                    ruleset.allow_path(path, landlock.READ)
                ruleset.allow_path(folder, landlock.READ)
                ruleset.allow_path(entry, landlock.READ)
            else:  # host-read
                for path, rights in self._host_read(protected):
                    ruleset.allow_path(path, rights)
                for path in (folder, entry, *spec.read, *extra_read):
                    ruleset.allow_path(path, landlock.READ)
            for path in DEVICES:
                ruleset.allow_path(path, landlock.DEVICE)
            if credentials_dir is not None:
                ruleset.allow_path(credentials_dir, landlock.READ)
            for path in spec.write:
                ruleset.allow_path(path, landlock.WRITE)
            ruleset.allow_path(temp_dir, landlock.WRITE)
        except OSError as exc:
            if ruleset is not None:
                ruleset.close()
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise SandboxUnavailable(f"cannot build the Landlock ruleset: {exc.strerror}") from None
        conf = [ruleset.fd, _NO_NEW_PRIVS, 0]
        limits = [
            (resource.RLIMIT_AS, self.memory_mb << 20),
            (resource.RLIMIT_FSIZE, self.file_size_mb << 20),
            (resource.RLIMIT_NOFILE, self.open_files),
        ]
        if os.geteuid() == 0:  # RLIMIT_NPROC is never applied to root: a PID namespace is
            conf[1] |= _NEW_PIDNS | _DROP_CAPS
            conf[2] = max(PID_MAX_FLOOR, self.processes)
        else:
            limits.append((resource.RLIMIT_NPROC, self.processes))
        conf.append(len(limits))
        for which, value in limits:
            conf += [which, value]
        env = {"TMPDIR": temp_dir}
        return Confinement(spec.profile, tuple(conf), env, ruleset, temp_dir)

    def _protected(self) -> tuple[str, ...]:
        paths = [*SYSTEM_SECRETS, *self.protected]
        if self.temp_root is not None:
            paths.append(self.temp_root)
        return tuple(dict.fromkeys(os.path.realpath(p) for p in paths))

    def _temp_dir(self) -> str:
        root = self.temp_root or os.path.join(
            tempfile.gettempdir(), f"ongrid-sandbox-{os.getuid()}"
        )
        self.temp_root = root
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(root, 0o700)
            info = os.lstat(root)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                raise SandboxUnavailable(f"{root} is not a folder of this user")
            return tempfile.mkdtemp(prefix="call-", dir=root)
        except OSError as exc:
            raise SandboxUnavailable(f"cannot make the call's temp dir: {exc}") from None

    def _host_read(self, protected: tuple[str, ...]) -> list[tuple[str, int]]:
        """Rules that let a call read the whole host except the protected paths: read on
        every sibling of each protected path and of its parents (Landlock only allows), and
        listing (not reading) everywhere. Kept while none of the folders listed for it
        changed (one ``stat`` each per call): an entry added next to a protected path since
        is covered at the next call."""
        with self._lock:
            cached = self._host_rules
        if cached is not None and cached[0] == protected and _unchanged(cached[1]):
            return cached[2]
        rules: list[tuple[str, int]] = [("/", landlock.READ_DIR)]
        listed: list[tuple[str, int]] = []
        _siblings("/", protected, rules, listed)
        with self._lock:
            self._host_rules = (protected, tuple(listed), rules)
        return rules


def _process_entry(path: str) -> bool:
    """``/proc`` itself or a process's entry in it (``/proc/1/environ``, ``/proc/self``)."""
    parts = path.split("/")
    if parts[1:2] != ["proc"]:
        return False
    return len(parts) == 2 or parts[2] == "" or parts[2].isdigit() or parts[2] in _PROC_SELF


def _overlap(path: str, protected: tuple[str, ...]) -> str | None:
    for secret in protected:
        if path == secret or _under(secret, path) or _under(path, secret):
            return secret
    return None


def _under(path: str, folder: str) -> bool:
    return folder == "/" or path.startswith(folder.rstrip("/") + "/")


def _unchanged(listed: tuple[tuple[str, int], ...]) -> bool:
    try:
        return all(os.stat(folder).st_mtime_ns == mtime for folder, mtime in listed)
    except OSError:
        return False


def _siblings(
    folder: str,
    protected: tuple[str, ...],
    rules: list[tuple[str, int]],
    listed: list[tuple[str, int]],
) -> None:
    try:
        listed.append((folder, os.stat(folder).st_mtime_ns))
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if path == "/proc":  # its entries but the processes'
            _siblings(path, protected, rules, listed)
            continue
        if path in protected or _process_entry(path):
            continue
        if any(_under(secret, path) for secret in protected):
            if os.path.isdir(path) and not os.path.islink(path):
                _siblings(path, protected, rules, listed)
            continue
        if _overlap(os.path.realpath(path), protected) is None:  # not a link into a secret
            rules.append((path, landlock.READ))


__all__ = ["Confinement", "SandboxPolicy"]
