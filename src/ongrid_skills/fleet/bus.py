"""The bus: connecting to NATS as the settings say, and the names of what the fleet keeps there.

Everything the fleet puts on NATS is named from ``ONGRID_FLEET_PREFIX`` (default ``ongrid``):

==============================  ===========================================================
``<prefix>-hosts``              key-value bucket: one entry per online worker (its inventory),
                                history 1, entries expire after the heartbeat TTL
``<prefix>-calls``              stream, work-queue retention, subjects ``<prefix>.call.>``:
                                signed calls and cancels, one durable consumer per host
``<prefix>-events``             stream, interest retention, subjects ``<prefix>.event.>``: the
                                events and outcome of each call, one consumer per manager
``<prefix>.call.<host>``        what a host is asked (consumer ``w-<hash of the host id>``)
``<prefix>.event.<mgr>.<id>``   what a call of manager ``<mgr>`` became (consumer ``m-<mgr>``)
``_INBOX.<prefix>.w-<hash>.>``  a worker's replies (``_INBOX.<prefix>.managers.>``: managers')
==============================  ===========================================================

All three are file-backed, so they survive a NATS server restart. Either side creates what is
missing when it connects; an existing stream or bucket is used as it is. This module never
decides anything about calls: it connects and names.
"""

from __future__ import annotations

import hashlib
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import (
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from ongrid_skills.errors import ConfigError
from ongrid_skills.settings import Settings

LOG = logging.getLogger("ongrid_skills.fleet")
#: A host id: DNS-like labels of letters, digits, ``_`` and ``-``, joined by dots.
HOST_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*")
MAX_HOST_ID = 128
#: How long an undelivered call or an unread event is kept at most (a safety net: calls are
#: taken within their expiry and events read at once).
KEEP_SECONDS = 3600
#: JetStream's window for de-duplicating a publication retried under the same message id.
DUPLICATE_WINDOW_SECONDS = 120
RECONNECT_WAIT_SECONDS = 1
ERROR_REPEAT_SECONDS = 30.0
#: Attempts at a manager's first connection before it refuses to start.
MANAGER_FIRST_ATTEMPTS = 5
#: The shortest ping interval (a loaded server must not look dead): see :func:`connect`.
MIN_PING_SECONDS = 1.0


def host_id_problem(host: str) -> str | None:
    """Why ``host`` cannot be a host id (a subject's tokens, a key of the bucket), or None.

    >>> host_id_problem("web-1.example.com") is None, host_id_problem("a b")
    (True, "host id 'a b' must be letters, digits, _ and - in dot-separated labels")
    """
    if len(host) > MAX_HOST_ID:
        return f"host id is {len(host)} characters, at most {MAX_HOST_ID}"
    if not HOST_ID_RE.fullmatch(host):
        return f"host id {host!r} must be letters, digits, _ and - in dot-separated labels"
    return None


@dataclass(frozen=True, slots=True)
class Names:
    """The streams, bucket, subjects and consumers of one fleet prefix."""

    prefix: str

    @property
    def hosts_bucket(self) -> str:
        return f"{self.prefix}-hosts"

    @property
    def calls_stream(self) -> str:
        return f"{self.prefix}-calls"

    @property
    def events_stream(self) -> str:
        return f"{self.prefix}-events"

    def call_subject(self, host: str) -> str:
        return f"{self.prefix}.call.{host}"

    def reply_prefix(self, manager: str) -> str:
        return f"{self.prefix}.event.{manager}"

    def worker_consumer(self, host: str) -> str:
        # Consumer names cannot hold dots; host ids can.
        return "w-" + hashlib.sha256(host.encode()).hexdigest()[:24]

    def manager_consumer(self, manager: str) -> str:
        return f"m-{manager}"

    def worker_inbox(self, host: str) -> str:
        """Where a worker's replies come (JetStream API answers, the calls it fetches): one
        token per host, so NATS permissions can give each worker its own and no other's."""
        return f"_INBOX.{self.prefix}.{self.worker_consumer(host)}"

    @property
    def manager_inbox(self) -> str:
        return f"_INBOX.{self.prefix}.managers"


Callback = Callable[[], Awaitable[None]]


def connect_options(settings: Settings, name: str) -> dict[str, Any]:
    """The keyword arguments of ``nats.connect`` for these settings (servers, credentials,
    NKey seed, TLS); a setting that names a missing file is a ConfigError."""
    if not settings.nats_url:
        raise ConfigError("ONGRID_NATS_URL is not set: the fleet needs a NATS server")
    servers = [s.strip() for s in settings.nats_url.split(",") if s.strip()]
    options: dict[str, Any] = {
        "servers": servers,
        "name": name,
        "reconnect_time_wait": RECONNECT_WAIT_SECONDS,
        "allow_reconnect": True,
    }
    for setting, key in (("nats_creds", "user_credentials"), ("nats_nkey_seed", "nkeys_seed")):
        path = getattr(settings, setting)
        if path:
            _readable(path, setting)
            options[key] = path
    if settings.nats_tls_ca or settings.nats_tls_cert:
        options["tls"] = _tls_context(settings)
    return options


def authenticated(settings: Settings) -> bool:
    """Whether these settings give NATS any credential: a credentials file, an NKey seed, a
    client certificate, or a user (and password) or token in a server URL.

    >>> authenticated(Settings(nats_url="nats://a:4222,nats://b:4222"))
    False
    >>> authenticated(Settings(nats_url="tls://worker:secret@a:4222"))
    True
    """
    if settings.nats_creds or settings.nats_nkey_seed or settings.nats_tls_cert:
        return True
    servers = [s.strip() for s in (settings.nats_url or "").split(",") if s.strip()]
    return bool(servers) and all("@" in urlsplit(s).netloc for s in servers)


def _readable(path: str, setting: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        env = "ONGRID_" + setting.upper()
        raise ConfigError(f"{env}: cannot read {path}: {exc.strerror or exc}") from None


def _tls_context(settings: Settings) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    try:
        if settings.nats_tls_ca:
            context.load_verify_locations(settings.nats_tls_ca)
        if settings.nats_tls_cert:
            if not settings.nats_tls_key:
                raise ConfigError("ONGRID_NATS_TLS_CERT needs ONGRID_NATS_TLS_KEY")
            context.load_cert_chain(settings.nats_tls_cert, settings.nats_tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"NATS TLS files: {exc}") from None
    return context


async def connect(
    settings: Settings,
    name: str,
    *,
    disconnected: Callback | None = None,
    reconnected: Callback | None = None,
    first_attempts: int = -1,
    ttl: float | None = None,
    inbox: str | None = None,
) -> Client:
    """A connection that, once made, reconnects forever (the callbacks hear about outages).

    ``first_attempts`` bounds the attempts at the first connection (a manager refuses to start
    without its bus; -1: a worker waits for it, as for any later outage). ``ttl``, the fleet's
    heartbeat TTL, sets how often the client pings the server: a link that died silently (a
    partition drops packets, nobody resets the connection) is then noticed after three pings
    unanswered, every sixth of the TTL (at least every second): half the TTL, not nats-py's
    default of minutes. ``inbox``: the prefix of this party's reply subjects (see
    :meth:`Names.worker_inbox`)."""
    last: dict[str, float] = {}

    async def error(exc: Exception) -> None:
        # An outage fails a reconnection every second: say each distinct error every 30 s.
        text, now = str(exc), time.monotonic()
        if now - last.get(text, -ERROR_REPEAT_SECONDS) >= ERROR_REPEAT_SECONDS:
            last[text] = now
            LOG.warning("NATS: %s", text)

    options = connect_options(settings, name)
    if not authenticated(settings):
        LOG.warning(
            "NATS: %s connects to %s with no authentication (no credentials file, NKey seed, "
            "client certificate, user/password or token): anyone who reaches that server may "
            "read and write the fleet's bus; give each party a NATS user of its own "
            "(docs/fleet.md, NATS permissions)",
            name,
            ", ".join(_without_password(s) for s in options["servers"]),
        )
    options["max_reconnect_attempts"] = first_attempts
    if inbox is not None:
        options["inbox_prefix"] = inbox
    if ttl is not None:
        options["ping_interval"] = max(ttl / 6, MIN_PING_SECONDS)
        options["max_outstanding_pings"] = 2
    try:
        client = await nats.connect(
            **options,
            error_cb=error,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
        )
    except Exception as exc:  # nats-py raises its own errors, OSError and ssl errors
        shown = ", ".join(_without_password(s) for s in options["servers"])
        raise ConfigError(f"cannot connect to NATS at {shown}: {exc}") from None
    # Connected: from now on an outage is waited out, however long (nats-py reads its options
    # at each reconnection).
    client.options["max_reconnect_attempts"] = -1
    return client


def _without_password(url: str) -> str:
    return re.sub(r"//[^@/]*@", "//", url)


async def ensure(js: JetStreamContext, names: Names, ttl: float) -> KeyValue:
    """The fleet's bucket and streams, created when missing; returns the bucket."""
    try:
        kv = await js.key_value(names.hosts_bucket)
    except BucketNotFoundError:
        kv = await js.create_key_value(
            KeyValueConfig(bucket=names.hosts_bucket, history=1, ttl=ttl, storage=StorageType.FILE)
        )
    await _stream(
        js,
        StreamConfig(
            name=names.calls_stream,
            subjects=[f"{names.prefix}.call.>"],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            max_age=KEEP_SECONDS,
            duplicate_window=DUPLICATE_WINDOW_SECONDS,
        ),
    )
    await _stream(
        js,
        StreamConfig(
            name=names.events_stream,
            subjects=[f"{names.prefix}.event.>"],
            retention=RetentionPolicy.INTEREST,
            storage=StorageType.FILE,
            max_age=KEEP_SECONDS,
            duplicate_window=DUPLICATE_WINDOW_SECONDS,
            discard=DiscardPolicy.OLD,
        ),
    )
    return kv


async def _stream(js: JetStreamContext, config: StreamConfig) -> None:
    assert config.name is not None
    try:
        await js.stream_info(config.name)
    except NotFoundError:
        await js.add_stream(config)
