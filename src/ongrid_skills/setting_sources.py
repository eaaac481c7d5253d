"""Where settings come from: the TOML file, the ``ONGRID_*`` variable of each setting, the skill
config keys (environment over the file's ``[config]`` table), and the trace of each value's origin.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ongrid_skills.errors import ConfigError


def read_file(config: str) -> dict[str, Any]:
    """The ``[ongrid]`` table of a TOML settings file (or the whole file without one)."""
    try:
        with open(config, "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {config}: {exc}") from None
    section = data.get("ongrid", data)
    if not isinstance(section, dict):
        raise ConfigError(f"config file {config}: [ongrid] must be a table")
    return section


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
    """Where the values of one ``Settings.traced`` came from; keys of the file it ignored."""

    origins: dict[str, Origin] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    def origin(self, name: str) -> Origin:
        return self.origins.get(name, DEFAULT_ORIGIN)


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


def flatten(table: Any, prefix: str = "") -> dict[str, str]:
    """``{"prometheus": {"url": "x"}}`` → ``{"prometheus.url": "x"}``."""
    if not isinstance(table, dict):
        raise ConfigError("[config] must be a table")
    out: dict[str, str] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
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
