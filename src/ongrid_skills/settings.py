"""Settings: ``ONGRID_*`` environment variables over an optional TOML file; env wins."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError
from .paths import split_dir_list
from .skill import DEFAULT_TIMEOUT_SECONDS


@dataclass(frozen=True, slots=True)
class Settings:
    external_dirs: tuple[str, ...] = ()
    native_dirs: tuple[str, ...] = ()
    persona_dirs: tuple[str, ...] = ()
    data_dir: str = ".ongrid"
    database_url: str | None = None
    default_timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    max_concurrent_executions: int = field(default_factory=lambda: 4 * (os.cpu_count() or 1))
    execution_queue_size: int = 100
    approval_ttl_seconds: int = 3600

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, config: str | None = None) -> Settings:
        """Read the TOML file (if any), then let ``ONGRID_*`` variables override it."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if config:
            try:
                with open(config, "rb") as fh:
                    data = tomllib.load(fh)
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"config file {config}: {exc}") from None
            section = data.get("ongrid", data)
            values.update(section)
        for spec in fields(cls):
            raw = env.get(_ENV_NAMES.get(spec.name, "ONGRID_" + spec.name.upper()))
            if raw is not None:
                values[spec.name] = raw
        return cls(**{k: _coerce(k, v) for k, v in values.items() if k in _FIELD_NAMES})


_FIELD_NAMES = {f.name for f in fields(Settings)}
_ENV_NAMES = {
    "external_dirs": "ONGRID_SKILLS_EXTERNAL_DIRS",
    "native_dirs": "ONGRID_SKILLS_NATIVE_DIRS",
    "persona_dirs": "ONGRID_PERSONAS_DIRS",
}
_INT_FIELDS = {
    "default_timeout_seconds",
    "max_concurrent_executions",
    "execution_queue_size",
    "approval_ttl_seconds",
}


def _coerce(name: str, value: Any) -> Any:
    if name.endswith("_dirs"):
        if isinstance(value, str):
            return tuple(split_dir_list(value))
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"{name} must be a path list")
    if name in _INT_FIELDS:
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be an integer, got {value!r}") from None
        if number < 0 or (number == 0 and name != "execution_queue_size"):
            raise ConfigError(f"{name} must be positive, got {number}")
        return number
    return None if value in ("", None) else str(value)
