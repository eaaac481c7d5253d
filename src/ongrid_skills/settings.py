"""Settings: ``ONGRID_*`` environment variables over an optional TOML file; env wins.

:meth:`Settings.traced` also says where each value came from (``ongrid-skills config`` shows it).
This module reads the environment and the file it is given, nothing else: it never creates a
directory or opens the store. It holds the field table and the loading; where values come from is
:mod:`ongrid_skills.setting_sources`, what each may hold :mod:`ongrid_skills.setting_values` (a
new setting's kind is declared there: one declared nowhere is a string).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ongrid_skills.errors import ConfigError
from ongrid_skills.setting_sources import (
    DEFAULT_ORIGIN,
    ConfigView,
    Origin,
    Trace,
    env_var,
    flatten,
    read_file,
)
from ongrid_skills.setting_values import (
    DEFAULT_PUBLIC_URL,
    LLM_PROVIDERS,
    LOG_LEVELS,
    SANDBOX_PROFILES,
    coerce,
)
from ongrid_skills.types import DEFAULT_TIMEOUT_SECONDS

__all__ = [
    "DEFAULT_ORIGIN",
    "DEFAULT_PROMPT_LISTING_CHARS",
    "DEFAULT_PUBLIC_URL",
    "DEFAULT_READ_PATHS",
    "LLM_PROVIDERS",
    "LOG_LEVELS",
    "SANDBOX_PROFILES",
    "ConfigView",
    "Origin",
    "Settings",
    "Trace",
    "env_var",
]

#: Default readable roots of the file built-ins (``tail_file``, ``disk_usage``).
DEFAULT_READ_PATHS = ("/var/log",)

#: The default cap, in characters, of the instructions listing in an agent's system prompt.
DEFAULT_PROMPT_LISTING_CHARS = 4000


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
            values.update(read_file(config))
            from_file = Origin("file", os.path.abspath(config))
            for key in values:
                if key in _FIELD_NAMES:
                    trace.origins[key] = from_file
                elif key != "config":
                    trace.ignored.append(key)
        skill_config = flatten(values.pop("config", {}) or {})
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
                    settled[key] = coerce(key, value)
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


_FIELD_NAMES = {f.name for f in fields(Settings)} - {"config", "config_file"}
_LLM_KEY_FALLBACK = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
