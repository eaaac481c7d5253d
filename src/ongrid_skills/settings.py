"""Settings: ``ONGRID_*`` environment variables over an optional TOML file; env wins.

:meth:`Settings.traced` also says where each value came from (``ongrid-skills config`` shows it).
This module reads the environment and the file it is given, nothing else: it never creates a
directory or opens the store.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import tomllib
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ongrid_skills.errors import ConfigError
from ongrid_skills.paths import split_dir_list
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS

#: Default readable roots of the file built-ins (``tail_file``, ``disk_usage``).
DEFAULT_READ_PATHS = ("/var/log",)

#: The default cap, in characters, of the instructions listing in an agent's system prompt.
DEFAULT_PROMPT_LISTING_CHARS = 4000

#: Where people reach the console by default: ``serve``'s own default address.
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8731"


@dataclass(frozen=True, slots=True)
class Settings:
    external_dirs: tuple[str, ...] = ()
    native_dirs: tuple[str, ...] = ()
    persona_dirs: tuple[str, ...] = ()
    data_dir: str = ".ongrid"
    database_url: str | None = None
    audit_key_file: str | None = None  # else $data_dir/audit.key (see docs/security.md)
    audit_sink: str | None = None  # a file path, `syslog` or `syslog:SOCKET`; off by default
    default_timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    max_concurrent_executions: int = field(default_factory=lambda: 4 * (os.cpu_count() or 1))
    execution_queue_size: int = 100
    approval_ttl_seconds: int = 3600
    # Incoming-webhook URLs told about approval requests (docs/notifications.md). Their paths may
    # hold secrets (Slack's do): kept out of repr, and never logged or audited whole.
    approval_webhooks: tuple[str, ...] = field(default=(), repr=False)
    public_url: str = DEFAULT_PUBLIC_URL  # the console's base URL, for links in notifications
    # Web console sessions (docs/ui.md): ended after this long without a request, and after
    # this long in any case.
    web_session_idle_seconds: int = 3600
    web_session_max_seconds: int = 12 * 3600
    # Peers (addresses or CIDRs) whose proxy headers serve believes (X-Forwarded-For/-Proto);
    # empty: none, the TCP peer is the client (docs/security.md).
    trusted_proxies: tuple[str, ...] = ()
    # Replicas on a shared database (docs/fleet.md): a replica whose lease was not renewed for
    # this long is presumed dead and its running calls become interrupted.
    replica_lease_ttl_seconds: int = 30
    # Schedules (docs/triggers.md): a firing due longer ago than this when found was missed
    # (everything was down); it runs once or is skipped, per the schedule's policy.
    schedule_late_seconds: int = 60
    # A running call's events are stored in batches, this long after the first of each batch:
    # how late a client of another replica sees them (docs/fleet.md).
    event_flush_ms: int = 500
    # Edge workers over NATS (docs/fleet.md): the server URL(s), comma-separated; unset, there is
    # no fleet. The options nats-py takes: a credentials file, an NKey seed file, TLS files.
    nats_url: str | None = field(default=None, repr=False)  # may hold user:password
    nats_creds: str | None = None
    nats_nkey_seed: str | None = None
    nats_tls_ca: str | None = None
    nats_tls_cert: str | None = None
    nats_tls_key: str | None = None
    # The first token of every subject, stream and bucket of the fleet (several fleets, or a
    # test per prefix, on one NATS server).
    fleet_prefix: str = "ongrid"
    # A worker missing its heartbeat this long is offline, and its running calls interrupted.
    fleet_ttl_seconds: int = 15
    # The manager's Ed25519 key signing the calls it dispatches (else $data_dir/fleet.key), and
    # the worker's file of the managers' public keys it obeys (OpenSSH lines or PEM blocks).
    fleet_key_file: str | None = None
    fleet_manager_keys: str | None = None
    # On a manager: the file of the workers' public keys, one per host id (`host-id ssh-ed25519
    # AAAA… comment` lines); a host whose entry no key of it signed is unverified, never offered.
    fleet_worker_keys: str | None = None
    toolbag_deferral_threshold: int = 30
    # The agent's system prompt lists instructions skills up to this many characters (the most
    # relevant first); the model finds the others with search_skills. 0: list none.
    prompt_listing_max_chars: int = DEFAULT_PROMPT_LISTING_CHARS
    bundled_skills: bool = True  # the package's built-in catalogue (skills/ + read/search)
    # The agent kernel's LLM provider (SPEC §8, docs/agent.md).
    llm_provider: str = "openai"  # openai (any OpenAI-compatible endpoint) | anthropic
    llm_base_url: str | None = None
    llm_model: str | None = None  # a persona's `model` wins
    llm_api_key: str | None = field(default=None, repr=False)  # else OPENAI_/ANTHROPIC_API_KEY
    llm_max_retries: int = 3  # 429/5xx/connection errors, with backoff (by the SDK)
    llm_timeout_seconds: int = 120
    llm_stream: bool = True  # stream model output where the provider streams
    llm_max_tokens: int = 4096  # per model reply (Anthropic requires it)
    # The reviewer (docs/agent.md): a persona that gives its opinion on each new mutating or
    # dangerous request; advisory unless it may confirm mutating calls (never dangerous ones).
    reviewer_persona: str | None = None
    reviewer_confirms_mutating: bool = False
    reviewer_timeout: int = 60  # seconds for its answer; past it, a note on the card
    # How much the commands log (debug|info|warning|error); unset: each command's own default.
    log_level: str | None = None
    # What the built-ins may reach (docs/security.md): readable roots of the file built-ins, and
    # network rules of the probes (CIDRs, addresses or host names; ``*.example.com`` allowed).
    builtin_read_paths: tuple[str, ...] = DEFAULT_READ_PATHS
    builtin_net_allow: tuple[str, ...] = ()  # set: the probes reach only these targets
    builtin_net_deny: tuple[str, ...] = ()  # added to the always-denied link-local + metadata
    builtin_http_body_allow: tuple[str, ...] = ()  # probe_http returns bodies of these only
    # Packs (SPEC §11, docs/packs.md): the operator's trusted signing keys (a file of
    # `ssh-ed25519 AAAA…` lines or PEM blocks) and the limits of unpacking one pack.
    trusted_pack_keys: str | None = None
    pack_max_files: int = 10_000
    pack_max_unpacked_bytes: int = 200 * 1024 * 1024
    # Marketplace indexes (local paths or https:// URLs of index.json files), and how packs are
    # fetched: the time one download or git clone may take, whether plain http:// is allowed
    # (off: https only), how long the files of a withdrawn version are kept (None: the longest
    # timeout of its skills plus a minute).
    pack_indexes: tuple[str, ...] = ()
    pack_fetch_timeout_seconds: int = 300
    pack_allow_http: bool = False
    pack_keep_seconds: int | None = None
    # The git forge ``owner/repo[@ref]`` sources name (``https://github.com``); None: that
    # shorthand is off and such text stays a path (docs/packs.md).
    pack_git_forge: str | None = None
    # Credentials (SPEC §18, docs/credentials.md): the key sealing stored values (else
    # $data_dir/credentials.key), the folders file: references may read, the commands command:
    # references may run (name -> argv, a JSON object or a TOML table), and where the per-call
    # $CREDENTIALS_DIRECTORY folders go (else /dev/shm, else the data dir).
    credentials_key_file: str | None = None
    credential_file_roots: tuple[str, ...] = (
        "/run/secrets",
        "/run/credentials",
        "/var/run/secrets",
    )
    credential_commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    credential_env: tuple[str, ...] = ()  # the manager's variables env: references may read
    credentials_runtime_dir: str | None = None
    # Sandbox profiles (SPEC §20, docs/security.md): the profile of each class's calls when the
    # skill declares a looser one or none (strict | host-read | none), whether a skill may
    # declare a looser one than its class's default, and the limits of a confined call.
    sandbox_default_safe: str = "none"
    sandbox_default_mutating: str = "none"
    sandbox_default_dangerous: str = "none"
    sandbox_skills_may_loosen: bool = False
    sandbox_memory_mb: int = 4096
    sandbox_processes: int = 512
    config: Mapping[str, str] = field(
        default_factory=dict
    )  # skill config keys, e.g. prometheus.url
    #: The TOML file these settings were read from (``--config``): built-ins never read it.
    config_file: str | None = None

    def config_value(self, key: str) -> str | None:
        """A skill config key: ``ONGRID_PROMETHEUS_URL`` for ``prometheus.url``, then the file."""
        return self.config.get(key)

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, config: str | None = None) -> Settings:
        """Read the TOML file (if any), then let ``ONGRID_*`` variables override it."""
        return cls.traced(environ, config)[0]

    @classmethod
    def traced(
        cls, environ: Mapping[str, str] | None = None, config: str | None = None
    ) -> tuple[Settings, Trace]:
        """Like :meth:`load`, plus where each value came from."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        trace = Trace()
        if config:
            try:
                with open(config, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"config file {config}: {exc}") from None
            section = data.get("ongrid", data)
            if not isinstance(section, dict):
                raise ConfigError(f"config file {config}: [ongrid] must be a table")
            values.update(section)
            from_file = Origin("file", os.path.abspath(config))
            for key in values:
                if key in _FIELD_NAMES:
                    trace.origins[key] = from_file
                elif key != "config":
                    trace.ignored.append(key)
        skill_config = _flatten(values.pop("config", {}) or {})
        for spec in fields(cls):
            if spec.name not in _FIELD_NAMES:
                continue
            name = env_var(spec.name)
            raw = env.get(name)
            if raw is not None:
                values[spec.name] = raw
                trace.origins[spec.name] = Origin("env", name)
        settled: dict[str, Any] = {}
        for key, value in values.items():
            if key in _FIELD_NAMES:
                try:
                    settled[key] = _coerce(key, value)
                except ConfigError as exc:  # say where the bad value was written
                    raise ConfigError(f"{trace.origin(key).where}: {exc.message}") from None
        settled["config"] = ConfigView(skill_config, env)
        settled["config_file"] = os.path.abspath(config) if config else None
        if settled.get("llm_api_key") is None:  # the provider's usual variable
            provider = settled.get("llm_provider") or "openai"
            fallback = _LLM_KEY_FALLBACK[provider]
            settled["llm_api_key"] = env.get(fallback) or None
            if settled["llm_api_key"] is not None:
                trace.origins["llm_api_key"] = Origin("env", fallback)
        return cls(**settled), trace


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one setting's value came from: ``flag`` (its option), ``env`` (the variable),
    ``file`` (the TOML file's absolute path) or ``default``."""

    kind: str
    where: str | None = None

    def __str__(self) -> str:
        return self.kind if self.where is None else f"{self.kind} {self.where}"


DEFAULT_ORIGIN = Origin("default")


@dataclass(slots=True)
class Trace:
    """Where the values of one :meth:`Settings.traced` came from; keys of the file it ignored."""

    origins: dict[str, Origin] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def origin(self, name: str) -> Origin:
        return self.origins.get(name, DEFAULT_ORIGIN)


_FIELD_NAMES = {f.name for f in fields(Settings)} - {"config", "config_file"}


class ConfigView(Mapping[str, str]):
    """Skill config keys: the environment (``ONGRID_`` + key upper-cased, ``.``/``-`` → ``_``)
    wins over the ``[config]`` table of the settings file."""

    def __init__(self, file_values: Mapping[str, str], environ: Mapping[str, str]) -> None:
        self._file = dict(file_values)
        self._env = {k: v for k, v in environ.items() if k.startswith("ONGRID_")}

    @staticmethod
    def env_name(key: str) -> str:
        return "ONGRID_" + key.upper().replace(".", "_").replace("-", "_")

    def __getitem__(self, key: str) -> str:
        value = self._env.get(self.env_name(key))
        if value is None:
            value = self._file[key]
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._file)

    def __len__(self) -> int:
        return len(self._file)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return self.env_name(key) in self._env or key in self._file


def _flatten(table: Any, prefix: str = "") -> dict[str, str]:
    """``{"prometheus": {"url": "x"}}`` → ``{"prometheus.url": "x"}``."""
    if not isinstance(table, dict):
        raise ConfigError("[config] must be a table")
    out: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = str(value)
    return out


_ENV_NAMES = {
    "external_dirs": "ONGRID_SKILLS_EXTERNAL_DIRS",
    "native_dirs": "ONGRID_SKILLS_NATIVE_DIRS",
    "persona_dirs": "ONGRID_PERSONAS_DIRS",
}


def env_var(name: str) -> str:
    """The environment variable of a setting: ``ONGRID_DATA_DIR`` for ``data_dir``."""
    return _ENV_NAMES.get(name, "ONGRID_" + name.upper())


_INT_FIELDS = {
    "sandbox_memory_mb",
    "sandbox_processes",
    "default_timeout_seconds",
    "max_concurrent_executions",
    "execution_queue_size",
    "approval_ttl_seconds",
    "web_session_idle_seconds",
    "web_session_max_seconds",
    "replica_lease_ttl_seconds",
    "schedule_late_seconds",
    "event_flush_ms",
    "fleet_ttl_seconds",
    "toolbag_deferral_threshold",
    "prompt_listing_max_chars",
    "llm_max_retries",
    "llm_timeout_seconds",
    "llm_max_tokens",
    "reviewer_timeout",
    "pack_max_files",
    "pack_max_unpacked_bytes",
    "pack_fetch_timeout_seconds",
    "pack_keep_seconds",
}
#: Times to live of heartbeats and leases: whole seconds (docs/fleet.md), said so when refused.
_TTLS = {"fleet_ttl_seconds", "replica_lease_ttl_seconds"}
_ZERO_OK = {
    "sandbox_processes",
    "execution_queue_size",
    "llm_max_retries",
    "prompt_listing_max_chars",
    "pack_keep_seconds",
}
_BOOL_FIELDS = {
    "bundled_skills",
    "llm_stream",
    "pack_allow_http",
    "reviewer_confirms_mutating",
    "sandbox_skills_may_loosen",
}
SANDBOX_PROFILES = ("strict", "host-read", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")
LLM_PROVIDERS = ("openai", "anthropic")
_LLM_KEY_FALLBACK = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


_PREFIX_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
_NET_LIST_FIELDS = {"builtin_net_allow", "builtin_net_deny", "builtin_http_body_allow"}


def _coerce(name: str, value: Any) -> Any:
    if name == "approval_webhooks":
        urls = _coerce("builtin_net_allow", value) if isinstance(value, str) else value
        if not isinstance(urls, (list, tuple)) or not all(isinstance(u, str) for u in urls):
            raise ConfigError(f"{name} must be a list of http or https URLs")
        for number, url in enumerate(urls, 1):
            _check_http_url(f"{name} entry {number}", url.strip())
        return tuple(url.strip() for url in urls if url.strip())
    if name == "fleet_prefix":
        text = str(value).strip()
        if not _PREFIX_RE.fullmatch(text):
            raise ConfigError(f"{name} must be letters, digits, _ or - (1-32), got {value!r}")
        return text
    if name == "public_url":
        url = str(value).strip().rstrip("/")
        if not url:
            return DEFAULT_PUBLIC_URL
        _check_http_url(name, url, show=True)
        if "?" in url or "#" in url:  # links are made by appending /approvals/<id>
            raise ConfigError(f"{name} must hold no query or fragment: {url!r}")
        return url
    if name == "credential_commands":
        return _commands(name, value)
    if name == "credential_env":
        names = re.split(r"[,\s]+", value) if isinstance(value, str) else value
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{name} must be a list of variable names")
        kept = tuple(n for n in names if n)
        bad = [n for n in kept if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
        if bad or any(n.startswith("ONGRID_") for n in kept):
            raise ConfigError(f"{name}: variable names only, never an ONGRID_ one")
        return kept
    if name in ("builtin_read_paths", "credential_file_roots"):
        roots = _coerce("read_dirs", value)
        relative = [root for root in roots if not os.path.isabs(root)]
        if relative:
            raise ConfigError(f"{name} entries must be absolute paths, got {relative[0]!r}")
        return roots
    if name == "pack_git_forge":
        forge = str(value).strip().rstrip("/")
        if not forge:
            return None
        if not re.fullmatch(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~-]+)*", forge):
            raise ConfigError(f"{name} must be an https:// URL such as https://github.com")
        return forge
    if name == "pack_indexes":  # paths or URLs: commas or blanks, never ":" (URLs hold colons)
        if isinstance(value, str):
            entries = tuple(part for part in re.split(r"[,\s]+", value) if part)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            entries = tuple(v.strip() for v in value if v.strip())
        else:
            raise ConfigError(f"{name} must be a list of paths or https:// URLs")
        for entry in entries:
            if "://" in entry and not entry.lower().startswith(("https://", "http://")):
                raise ConfigError(f"{name}: {entry!r} is neither a path nor an https:// URL")
        return entries
    if name == "trusted_proxies":
        return _networks(name, value)
    if name in _NET_LIST_FIELDS:
        # Commas or blanks, never ":" (IPv6 addresses hold colons).
        if isinstance(value, str):
            return tuple(part for part in re.split(r"[,\s]+", value) if part)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value if v.strip())
        raise ConfigError(f"{name} must be a list of CIDRs, addresses or host names")
    if name.endswith("_dirs"):
        if isinstance(value, str):
            return tuple(split_dir_list(value))
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"{name} must be a path list")
    if name == "llm_provider":
        text = str(value).strip().lower()
        if text not in LLM_PROVIDERS:
            raise ConfigError(f"{name} must be openai or anthropic, got {value!r}")
        return text
    if name.startswith("sandbox_default_"):
        text = str(value).strip().lower()
        if text not in SANDBOX_PROFILES:
            raise ConfigError(f"{name} must be strict, host-read or none, got {value!r}")
        return text
    if name == "log_level":
        text = str(value).strip().lower()
        if text not in LOG_LEVELS:
            raise ConfigError(f"{name} must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
        return text
    if name in _BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if name in _INT_FIELDS:
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)  # a TOML true or 2.5 is never taken as 1 or 2
            number = int(value)
        except (TypeError, ValueError):
            kind = "a whole number of seconds (no fractions)" if name in _TTLS else "an integer"
            raise ConfigError(f"{name} must be {kind}, got {value!r}") from None
        if number < 0 or (number == 0 and name not in _ZERO_OK):
            raise ConfigError(f"{name} must be positive, got {number}")
        return number
    if value is not None and not isinstance(value, str):  # a TOML number, list or table
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value or None


def _commands(name: str, value: Any) -> dict[str, tuple[str, ...]]:
    """``{"vault": ["vault", "kv", "get"]}``: a JSON object (in the environment) or a table."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise ConfigError(f"{name} must be a JSON object of name: [argv…]") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a JSON object of name: [argv…]")
    out = {}
    for key, argv in value.items():
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) and a for a in argv)
            or not os.path.isabs(argv[0])
        ):
            raise ConfigError(
                f"{name}: {key!r} must be a list of arguments starting with an absolute path"
            )
        out[str(key)] = tuple(argv)
    return out


def _check_http_url(what: str, url: str, *, show: bool = False) -> None:
    """An absolute http or https URL with a host; the error names ``url`` only when ``show``
    (a webhook URL may carry its secret in the path: only its scheme is ever repeated)."""
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise ConfigError(f"{what} holds a blank or a control character")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises ValueError here
    except ValueError:
        raise ConfigError(f"{what} is not a valid URL" + (f": {url!r}" if show else "")) from None
    if parts.scheme.lower() not in ("http", "https"):
        scheme = parts.scheme or "none"
        raise ConfigError(f"{what} must be an http or https URL (its scheme is {scheme!r})")
    if not parts.hostname:
        raise ConfigError(f"{what} must name a host" + (f": {url!r}" if show else ""))


def _networks(name: str, value: Any) -> tuple[str, ...]:
    """IP addresses or networks (CIDRs), separated by commas or blanks, or a TOML list."""
    if isinstance(value, str):
        entries = tuple(part for part in re.split(r"[,\s]+", value) if part)
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        entries = tuple(v.strip() for v in value if v.strip())
    else:
        raise ConfigError(f"{name} must be a list of IP addresses or networks")
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(f"{name}: {entry!r} is not an IP address or network") from None
    return entries
