"""Settings become objects here, and only here.

This module owns the wiring every door shares: building the registry from the configured dirs
(and reporting on reloads only what changed), the reload triggers (SIGHUP and file watching),
opening a manager on the store, the embedded data dir's ownership lock, and start-up recovery.
Doors call :func:`open_manager` and :func:`reload_triggers`; they never assemble a manager
themselves. It must never import a door.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ongrid_skills.errors import Conflict
from ongrid_skills.settings import Settings
from ongrid_skills.skills.discovery import LogSink, default_sink
from ongrid_skills.skills.packroots import active_pack_roots
from ongrid_skills.skills.registry import Registry, RegistryHolder, build_registry
from ongrid_skills.types import Role

if TYPE_CHECKING:
    # Why not at the top: the CLI's local commands (list, show, validate, run) call
    # load_registry() and must not pay for the store (SQLAlchemy, Alembic), the manager or
    # watchfiles; the functions that need them import them when called.
    from ongrid_skills.execution.runner import Runner
    from ongrid_skills.fleet.dispatch import Fleet
    from ongrid_skills.manager import Manager
    from ongrid_skills.notify.webhooks import Delivery
    from ongrid_skills.packs.service import Packs
    from ongrid_skills.store import Store
    from ongrid_skills.store.tokens import TokenInfo

LOG = logging.getLogger("ongrid_skills.runtime")
WATCH_DEBOUNCE_MS = 500
#: How often the packs watch looks at the active links without an event, and how long its
#: start-up recovery waits for a pack command that holds the packs lock (that one recovers).
PACKS_POLL_MS = 5000
PACKS_RECOVERY_WAIT = 2.0
#: How often the stored personas' generation is read by :func:`watch_personas`.
PERSONAS_POLL_SECONDS = 1.0


def load_registry(
    external_dirs: Iterable[str] | None = None,
    persona_dirs: Iterable[str] | None = None,
    *,
    native_dirs: Iterable[str] | None = None,
    bundled: bool | None = None,
    settings: Settings | None = None,
    log: LogSink | None = None,
    pack_roots: Iterable[str] | None = None,
) -> Registry:
    """Load skills and personas. An omitted argument falls back to its ``ONGRID_*`` variable
    (``ONGRID_SKILLS_EXTERNAL_DIRS``, ``ONGRID_PERSONAS_DIRS``, ``ONGRID_SKILLS_NATIVE_DIRS``,
    ``ONGRID_BUNDLED_SKILLS``); ``pack_roots`` to the active packs of ``ONGRID_DATA_DIR``.

    Loader lines go to ``log`` (default: the ``ongrid_skills.loader`` logger at INFO).
    """
    base = settings or Settings.load()
    return build_registry(
        base.external_dirs if external_dirs is None else external_dirs,
        base.persona_dirs if persona_dirs is None else persona_dirs,
        native_dirs=base.native_dirs if native_dirs is None else native_dirs,
        bundled=base.bundled_skills if bundled is None else bundled,
        config=base.config,
        sink=log,
        default_timeout=base.default_timeout_seconds,
        pack_roots=active_pack_roots(base.data_dir) if pack_roots is None else pack_roots,
    )


def registry_builder(settings: Settings, sink: LogSink) -> Callable[[], Registry]:
    """A build function for the RegistryHolder that reports only what changed on reloads."""
    previous: list[str] = []
    previous_names: set[str] = set()

    def build() -> Registry:
        lines: list[str] = []
        registry = load_registry(settings=settings, log=lines.append)
        seen = set(previous)
        for line in lines:
            if line not in seen:
                sink(line)
        if previous:
            for name in sorted(previous_names - set(registry.skills)):
                sink(f'skill loader: removed skill "{name}"')
        previous[:] = lines
        previous_names.clear()
        previous_names.update(registry.skills)
        return registry

    return build


class DataDirLock:
    """The embedded data dir's ownership: one manager process per SQLite data dir recovers.

    Start-up recovery (interrupting rows left ``running``, starting approved calls, the expiry
    sweeper) belongs to the owner only: an ``mcp`` started beside a running ``serve`` on the same
    data dir must not interrupt the server's calls in flight. The lock is an ``flock`` on
    ``manager.lock``, so it is released by the kernel when the process dies, however it dies.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._fd: int | None = None

    def acquire(self) -> bool:
        """True when this process owns the data dir (always, on a shared database)."""
        if self.settings.database_url:
            return True  # a shared database: replicas coordinate through it, not a file lock
        os.makedirs(self.settings.data_dir, exist_ok=True)
        path = os.path.join(self.settings.data_dir, "manager.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        """Give the data dir up: closing the descriptor drops the ``flock``."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@asynccontextmanager
async def open_manager(
    settings: Settings,
    *,
    store: Store | None = None,
    runner: Runner | None = None,
    loader_sink: LogSink = default_sink,
    webhook_delivery: Delivery | None = None,
    guest: bool = False,
) -> AsyncIterator[Manager]:
    """Open the store, load the registry, claim the data dir, recover; close it all after.

    A ``store`` passed in stays open (its owner closes it); one opened here is closed here.
    ``guest``: a command that runs beside a server (``chat``, ``mcp``) finds the data dir owned
    as a matter of course; that is logged at INFO, not as a warning to the person using it.
    With ``ONGRID_APPROVAL_WEBHOOKS`` set, the approval desk's events are sent to them (how
    hard to try: ``webhook_delivery``, default :class:`Delivery`).
    """
    from ongrid_skills.manager import Manager  # noqa: PLC0415 (see the imports above)
    from ongrid_skills.metrics import Metrics  # noqa: PLC0415
    from ongrid_skills.notify.webhooks import WebhookNotifier  # noqa: PLC0415
    from ongrid_skills.store import open_store  # noqa: PLC0415

    own_store = store or open_store(
        settings.data_dir,
        settings.database_url,
        audit_key_file=settings.audit_key_file,
        audit_sink=settings.audit_sink,
    )
    holder = RegistryHolder(registry_builder(settings, loader_sink))
    metrics = Metrics()
    metrics.loaded(holder.current)
    manager = Manager(settings, own_store, holder, runner=runner, metrics=metrics)
    manager.ports.packs = ManagerPacks(manager)  # install_skill's pack service
    lock = DataDirLock(settings)
    notifier = None
    fleet = None
    try:
        if settings.approval_webhooks:  # before recovery: expiries found at start-up are told too
            urls, public = settings.approval_webhooks, settings.public_url
            notifier = WebhookNotifier(urls, public, own_store, delivery=webhook_delivery)
            await notifier.start()
            manager.desk.listeners.append(notifier.notify)
            manager.post_notice = notifier.post
        if settings.nats_url:  # before recovery: an approved host call found there runs there
            fleet = await _open_fleet(settings, manager)
        manager.owns_data_dir = lock.acquire()
        if manager.owns_data_dir:
            await manager.recover()
        else:
            LOG.log(
                logging.INFO if guest else logging.WARNING,
                "another manager owns %s: start-up recovery and the approval sweeper stay there",
                settings.data_dir,
            )
        yield manager
    finally:
        # Close first: the calls are interrupted and recorded while this process still owns
        # the data dir, so no other process starts recovering them meanwhile.
        await manager.close()
        if fleet is not None:  # after the manager: the cancels of its host calls went out
            await fleet.close()
        if notifier is not None:  # after the manager, before the store: last outcomes audited
            await notifier.close()
        lock.release()
        if store is None:
            own_store.close()


def open_packs(
    settings: Settings,
    store: Store,
    loaded: Callable[[], Registry] | None = None,
    *,
    lock_wait: float | None = None,
) -> Packs:
    """The packs of the data dir, recorded in ``store``; names are checked against ``loaded()``
    (default: a fresh load of these settings, as a CLI sees them). ``lock_wait``: how long a
    change waits for another one's before its Conflict (default: a command line's wait)."""
    from ongrid_skills.packs import Limits, load_trusted_keys  # noqa: PLC0415 (see above)
    from ongrid_skills.packs.fetch import FetchPolicy  # noqa: PLC0415
    from ongrid_skills.packs.home import LOCK_WAIT_SECONDS, PackHome  # noqa: PLC0415
    from ongrid_skills.packs.install import Installer  # noqa: PLC0415
    from ongrid_skills.packs.service import Packs  # noqa: PLC0415
    from ongrid_skills.packs.sources import SourcePolicy  # noqa: PLC0415
    from ongrid_skills.packs.unpack import stream_cap  # noqa: PLC0415

    home = PackHome(settings.data_dir, LOCK_WAIT_SECONDS if lock_wait is None else lock_wait)
    limits = Limits.from_settings(settings)

    def fresh() -> Registry:
        return load_registry(settings=settings, log=lambda _line: None)

    installer = Installer(
        home,
        store.packs(home.home_id),
        trusted=load_trusted_keys(settings.trusted_pack_keys),
        loaded=loaded or fresh,
        limits=limits,
        config=settings.config,
        keep_seconds=settings.pack_keep_seconds,
    )
    timeout = float(settings.pack_fetch_timeout_seconds)
    fetch = FetchPolicy(stream_cap(limits), timeout, settings.pack_allow_http)
    policy = SourcePolicy(fetch, timeout, forge=settings.pack_git_forge)
    return Packs(installer, policy, settings.pack_indexes)


class ManagerPacks:
    """The pack service lent to ``install_skill`` (``builtins.base.PackPort``): the packs of the
    manager's data dir with the rules of ``POST /v1/packs`` (remote sources and index ids, no
    path of the server, a remote pack signed by a trusted key), and the registry reloaded
    after a change so that the next turn of an agent is offered its skills."""

    #: How long an install waits for another pack change before its Conflict.
    LOCK_WAIT_SECONDS = 30.0

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    def _packs(self) -> Packs:
        manager = self.manager
        return open_packs(
            manager.settings,
            manager.store,
            lambda: manager.registry,
            lock_wait=self.LOCK_WAIT_SECONDS,
        )

    async def inspect(self, source: str) -> dict[str, Any]:
        packs = await asyncio.to_thread(self._packs)
        seen = await asyncio.to_thread(packs.inspect, source, local=False)
        return seen.summary

    async def install(self, source: str, actor: str, digest: str, why: str) -> dict[str, Any]:
        packs = await asyncio.to_thread(self._packs)
        outcome = await asyncio.to_thread(
            functools.partial(packs.install, source, actor, local=False, digest=digest, pinned=why)
        )
        if outcome.action != "unchanged":
            await sync_packs(self.manager, actor)
        return outcome.to_dict()


async def sync_packs(manager: Manager, actor: str) -> bool:
    """Reload when the active packs differ from those the registry was loaded with; True
    when it reloaded. What a pack change made by anyone (a CLI, the REST door) goes through."""
    roots = active_pack_roots(manager.settings.data_dir)
    if roots == manager.registry.pack_roots:
        return False
    await reload_logged(manager, actor)
    return True


async def watch_packs(manager: Manager, settings: Settings) -> None:
    """Reload when a pack is installed, upgraded, rolled back or removed in this data dir, by
    any process: the active links of ``packs/.active`` are what changes (audited ``packs``)."""
    from watchfiles import awatch  # noqa: PLC0415 (see the imports above)

    from ongrid_skills.packs.home import PackHome  # noqa: PLC0415

    home = PackHome(settings.data_dir)
    home.ensure()
    try:  # a change a killed command left half done: committed or undone, at start
        packs = open_packs(settings, manager.store, lambda: manager.registry)
        await asyncio.to_thread(packs.recover, PACKS_RECOVERY_WAIT)
    except Conflict:
        pass  # a pack command holds the lock: it recovers first itself
    except Exception:
        LOG.exception("pack recovery failed; the next pack command retries it")
    await sync_packs(manager, "packs")
    # Every few seconds without an event too: a change made between the first look and the
    # start of the watch is seen all the same.
    async for _changes in awatch(
        home.active_dir,
        debounce=WATCH_DEBOUNCE_MS,
        recursive=False,
        watch_filter=None,
        rust_timeout=PACKS_POLL_MS,
        yield_on_timeout=True,
    ):
        await sync_packs(manager, "packs")


async def watch_personas(manager: Manager, every: float = PERSONAS_POLL_SECONDS) -> None:
    """Tell the reload listeners (MCP ``list_changed``) when the stored personas changed,
    whoever changed them: another replica on the shared database, another process on the data
    dir. One read of the generation record per beat; the table only when it changed."""
    announced = manager.personas.generation
    while True:
        await asyncio.sleep(every)
        try:
            await asyncio.to_thread(manager.personas.refresh, force=True)
        except Exception:
            LOG.exception("reading the stored personas failed; the previous ones stay")
            continue
        if manager.personas.generation != announced:
            announced = manager.personas.generation
            manager.tell_listeners()


async def _open_fleet(settings: Settings, manager: Manager) -> Fleet:
    """Connect the manager to its edge workers (docs/fleet.md): host skills run there."""
    from ongrid_skills.execution.records import new_id  # noqa: PLC0415 (see the imports above)
    from ongrid_skills.fleet.dispatch import Fleet  # noqa: PLC0415
    from ongrid_skills.fleet.signing import manager_key  # noqa: PLC0415

    key = manager_key(settings)
    fleet = Fleet(settings, key, manager.replica_id or new_id(), manager.metrics)
    await fleet.start()
    manager.attach(fleet)
    LOG.info("fleet: calls are signed with %s (%s)", key.fingerprint, key.path)
    return fleet


def bootstrap_admin_token(store: Store) -> tuple[str, TokenInfo] | None:
    """On first start (no active token), create an admin token and return it, once: among
    replicas starting together on one empty database, only one of them (see create_first)."""
    return store.tokens.create_first("admin", Role.ADMIN, actor="manager")


def watched_dirs(settings: Settings) -> list[str]:
    """Every configured dir a reload reads from that exists now (skills, SKILL.md, personas)."""
    dirs = (*settings.external_dirs, *settings.native_dirs, *settings.persona_dirs)
    return [d for d in dirs if os.path.isabs(d) and os.path.isdir(d)]


async def reload_logged(manager: Manager, actor: str) -> None:
    """Reload; a failure is logged and the previous registry stays in place."""
    try:
        await manager.reload(actor)
    except Exception:
        LOG.exception("reload failed; the previous registry stays in place")


async def watch(manager: Manager, settings: Settings) -> None:
    """Reload on every (debounced) change under the watched dirs; audited as ``watch``."""
    dirs = watched_dirs(settings)
    if not dirs:
        return
    from watchfiles import awatch  # noqa: PLC0415 (see the imports above)

    async for _changes in awatch(*dirs, debounce=WATCH_DEBOUNCE_MS, recursive=True):
        await reload_logged(manager, "watch")


@asynccontextmanager
async def reload_triggers(
    manager: Manager, settings: Settings, *, watch_files: bool
) -> AsyncIterator[list[asyncio.Task[None]]]:
    """SIGHUP reloads (audited ``signal:SIGHUP``); so do pack changes in the data dir (see
    :func:`watch_packs`), and with ``watch_files``, changes of the configured dirs too; a
    change of the stored personas made elsewhere is told to the listeners
    (:func:`watch_personas`).

    Yields the list of background tasks, which a door may extend; all are cancelled on exit.
    """
    loop = asyncio.get_running_loop()
    background: list[asyncio.Task[None]] = []

    def on_hup() -> None:
        background.append(loop.create_task(reload_logged(manager, "signal:SIGHUP")))

    with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
        loop.add_signal_handler(signal.SIGHUP, on_hup)
    if watch_files:
        background.append(loop.create_task(watch(manager, settings)))
    background.append(loop.create_task(watch_packs(manager, settings)))
    background.append(loop.create_task(watch_personas(manager)))
    try:
        yield background
    finally:
        with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
            loop.remove_signal_handler(signal.SIGHUP)
        for task in background:
            task.cancel()
