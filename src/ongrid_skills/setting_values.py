"""What each setting may hold: its kind (integer, boolean, one of a few words, list, URL…) and the
checks of its value, whether it came from the environment (text) or the TOML file (typed).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import urllib.parse
from typing import Any

from ongrid_skills.errors import ConfigError
from ongrid_skills.paths import split_dir_list

#: Where people reach the console by default: ``serve``'s own default address.
DEFAULT_PUBLIC_URL = "http://127.0.0.1:8731"

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


_PREFIX_RE = re.compile(r"[A-Za-z0-9_-]{1,32}")
_NET_LIST_FIELDS = {"builtin_net_allow", "builtin_net_deny", "builtin_http_body_allow"}


def coerce(name: str, value: Any) -> Any:
    """The value of setting ``name`` as written (text from the environment, a TOML value from the
    file), parsed and checked; a :class:`ConfigError` names the setting."""
    if name == "approval_webhooks":
        urls = coerce("builtin_net_allow", value) if isinstance(value, str) else value
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
        roots = coerce("read_dirs", value)
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
