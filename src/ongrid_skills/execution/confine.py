"""Sandbox profiles enforced (SPEC §20, docs/security.md): what one confined call is given.

:class:`SandboxPolicy` holds the operator's side (a default profile per class, whether a skill
may loosen it, the limits, the protected paths); :meth:`SandboxPolicy.plan` turns a call's
effective profile into a :class:`Confinement`: a Landlock ruleset, the rlimits, the private
temp dir, and the ``conf`` words the spawn helper's confined path reads (``spawn_helper.c``).

Who enforces what:

- **Landlock** (in the child, before ``execve``): which files the call reads, runs and writes;
  TCP bind/connect when ``network`` is false (ABI ≥ 4); signals and abstract Unix sockets
  outside the call (ABI ≥ 6); ptrace of any process outside it. Not ``/proc/<pid>/environ``
  (measured: Landlock lets a read of it through): the rules keep ``/proc``'s process entries
  out (strict has no ``/proc``; host-read all of it but those).
- **no_new_privs**: a setuid or file-capability binary runs with the caller's ids.
- **capabilities** (a root manager): the bounding set emptied and every set cleared.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ongrid_skills.errors import SandboxUnavailable
from ongrid_skills.execution import landlock
from ongrid_skills.execution.spawner import HelperSpawner, Spawner
from ongrid_skills.execution.spec import SpawnSpec
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
MAX_FREE_TEMP_DIRS = 64
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
    ruleset: int  # its descriptor, -1 once closed
    temp_dir: str | None
    policy: SandboxPolicy | None = None

    def close(self) -> None:
        if self.ruleset >= 0:
            os.close(self.ruleset)
            self.ruleset = -1

    def release(self) -> None:
        self.close()
        if self.temp_dir is not None and self.policy is not None:
            self.policy.give_back(self.temp_dir)
        self.temp_dir = None


#: What builds a ruleset from its attr and (fd, rights) pairs: the spawn helper's.
Build = Callable[[bytes, Sequence[int]], int]


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
    # Open O_PATH descriptors of the rules every call of a profile shares: the system's
    # folders and devices (kept for the policy's life), and host-read's (kept while the folders
    # listed for them do not change).
    _system: list[int] | None = None
    _host: tuple[tuple[str, ...], tuple[tuple[str, int], ...], list[int]] | None = None
    _protected: tuple[str, ...] | None = None
    _free: list[str] = field(default_factory=list)  # emptied temp dirs, to reuse
    _lock: threading.RLock = field(default_factory=threading.RLock)

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

    def for_call(self, spec: SpawnSpec, entry: str, spawn: Spawner) -> Confinement | None:
        """The confinement of one call of ``spec`` (None: profile none); raises
        SandboxUnavailable, also when ``spawn`` (the ``subprocess`` fallback) cannot confine."""
        profile = self.resolve(spec.sandbox, spec.skill_class)
        if profile.profile == NONE:
            return None
        if not isinstance(spawn, HelperSpawner):
            raise SandboxUnavailable(
                f"profile {profile.profile} needs the spawn helper, and skills are spawned "
                "through subprocess here (no C compiler, ONGRID_SPAWN_HELPER=off, or not Linux)"
            )
        return self.plan(
            profile,
            spawn.ruleset,
            folder=spec.cwd,
            entry=entry,
            extra_read=spec.extra_read,
            credentials_dir=spec.credentials_dir,
        )

    def plan(
        self,
        spec: SandboxSpec,
        build: Build,
        *,
        folder: str,
        entry: str,
        extra_read: Iterable[str] = (),
        credentials_dir: str | None = None,
    ) -> Confinement | None:
        """The confinement of one call (None for ``none``); ``build`` makes the ruleset.
        Raises SandboxUnavailable."""
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
        if self.processes and os.geteuid() == 0 and not _pid_max_per_namespace():
            raise SandboxUnavailable(
                f"profile {spec.profile}: as root the process cap needs a PID namespace with its "
                f"own pid_max (Linux 6.14 or later; this is {os.uname().release}); run the "
                "manager as another user, or set ONGRID_SANDBOX_PROCESSES=0 to go without a cap"
            )
        protected = self._protected_paths()
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
        attr, fs_rights = landlock.handled(spec.network, version)
        temp_dir = self._temp_dir()
        opened: list[int] = []
        # Under the lock until the ruleset is built: the shared descriptors stay open.
        with self._lock:
            try:
                rules = list(self._shared(spec.profile, protected, fs_rights))
                own = [(path, landlock.READ) for path in (folder, entry, *spec.read, *extra_read)]
                if credentials_dir is not None:
                    own.append((credentials_dir, landlock.READ))
                own += [(path, landlock.WRITE) for path in (*spec.write, temp_dir)]
                for path, rights in own:
                    found = landlock.open_rule(path, rights, fs_rights)
                    if found is not None:
                        opened.append(found[0])
                        rules += found
                ruleset = build(attr, rules)
            except OSError as exc:
                self.give_back(temp_dir)
                raise SandboxUnavailable(
                    f"cannot build the Landlock ruleset: {exc.strerror or exc}"
                ) from None
            finally:
                for fd in opened:
                    os.close(fd)
        conf = [ruleset, _NO_NEW_PRIVS, 0]
        limits = [
            (resource.RLIMIT_AS, self.memory_mb << 20),
            (resource.RLIMIT_FSIZE, self.file_size_mb << 20),
            (resource.RLIMIT_NOFILE, self.open_files),
        ]
        root = os.geteuid() == 0
        if root:
            conf[1] |= _DROP_CAPS
        if self.processes and root:  # RLIMIT_NPROC is never applied to root: a PID namespace
            conf[1] |= _NEW_PIDNS
            conf[2] = max(PID_MAX_FLOOR, self.processes)
        elif self.processes:
            limits.append((resource.RLIMIT_NPROC, self.processes))
        conf.append(len(limits))
        for which, value in limits:
            conf += [which, value]
        env = {"TMPDIR": temp_dir}
        return Confinement(spec.profile, tuple(conf), env, ruleset, temp_dir, self)

    def _shared(self, profile: str, protected: tuple[str, ...], fs_rights: int) -> list[int]:
        """The (fd, rights) pairs, flattened, every call of ``profile`` shares."""
        with self._lock:
            system = self._system
            if system is None:
                system = self._system = _open_all(
                    [(p, landlock.READ) for p in SYSTEM_READ]
                    + [(p, landlock.DEVICE) for p in DEVICES],
                    fs_rights,
                )
            devices = system[-2 * len(DEVICES) :]  # the devices all exist on Linux
            if profile == STRICT:
                return system
            host = self._host
            if host is not None and host[0] == protected and _unchanged(host[1]):
                return host[2] + devices
            rules: list[tuple[str, int]] = [("/", landlock.READ_DIR)]
            listed: list[tuple[str, int]] = []
            _siblings("/", protected, rules, listed)
            if host is not None:
                for fd in host[2][::2]:
                    os.close(fd)
            opened = _open_all(rules, fs_rights)
            self._host = (protected, tuple(listed), opened)
            return opened + devices

    def close(self) -> None:
        """Close the descriptors the profiles' calls share (a later call opens them again)."""
        with self._lock:
            for fd in (self._system or [])[::2]:
                os.close(fd)
            for fd in (self._host[2] if self._host is not None else [])[::2]:
                os.close(fd)
            self._system = self._host = None

    def _protected_paths(self) -> tuple[str, ...]:
        found = self._protected
        if found is None:
            paths = [*SYSTEM_SECRETS, *self.protected]
            found = self._protected = tuple(dict.fromkeys(os.path.realpath(p) for p in paths))
        return found

    def give_back(self, path: str) -> None:
        """A call ended: empty its temp dir and keep it for another call (emptied in a thread
        of its own when the call left something). Why not remove it: removing a folder a
        Landlock rule named waits for an RCU grace period (milliseconds, measured), emptying it
        does not; the call's processes are gone (a root manager's calls die with their PID
        namespace; the orphan sweeper kills what escaped the others)."""
        try:
            with os.scandir(path) as entries:
                left = next(entries, None) is not None
        except OSError:
            left = True
        if left:
            threading.Thread(target=self._empty_and_keep, args=(path,), daemon=True).start()
        else:
            self._keep(path)

    def _empty_and_keep(self, path: str) -> None:
        try:
            for item in os.scandir(path):
                if item.is_dir(follow_symlinks=False):
                    shutil.rmtree(item.path)
                else:
                    os.unlink(item.path)
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            return
        self._keep(path)

    def _keep(self, path: str) -> None:
        try:
            os.chmod(path, 0o700)
        except OSError:
            shutil.rmtree(path, ignore_errors=True)
            return
        with self._lock:
            if len(self._free) < MAX_FREE_TEMP_DIRS:
                self._free.append(path)
                return
        threading.Thread(target=shutil.rmtree, args=(path, True), daemon=True).start()

    def _temp_dir(self) -> str:
        with self._lock:
            if self._free:
                return self._free.pop()
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


def _pid_max_per_namespace() -> bool:
    """Whether this kernel keeps a pid_max per PID namespace (6.14): before, the child's write
    would set the whole host's."""
    release = os.uname().release.split("-")[0].split(".")
    try:
        return (int(release[0]), int(release[1])) >= (6, 14)
    except (IndexError, ValueError):
        return False


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


def _open_all(rules: list[tuple[str, int]], fs_rights: int) -> list[int]:
    out: list[int] = []
    for path, rights in rules:
        try:
            found = landlock.open_rule(path, rights, fs_rights)
        except OSError:
            continue  # gone meanwhile, or unreadable: not allowed, then
        if found is not None:
            out += found
    return out


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
