"""The built-in catalogue: ``impl: builtin:<module>.<function>`` → a Python callable.

Names come from the modules of this package listed in :data:`MODULES` (every name in a module's
``__all__``), then from installed packages through the entry-point group
``ongrid_skills.builtins`` (entry-point name = the impl name, value = ``pkg.module:function``).

The Go-style names of the original system map through :data:`ALIASES` (documented in
docs/native-skills.md); an impl that resolves to nothing makes its skill *unavailable* with the
reason, it never fails the load.

This is the one place in ongrid-skills that loads modules by name (``importlib``), and it does
so on purpose: the skill formats (skill.json, SKILL.md) and the registry import no built-in, so
the import graph stays one-way (import-linter forbids ``skills`` → ``builtins``). It must never
import a built-in module statically.
"""

from __future__ import annotations

import importlib
import importlib.resources
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any

#: Modules of ongrid_skills.builtins that provide functions, by impl prefix.
MODULES = ("net", "http", "dns", "files", "procs", "journal", "prom", "catalogue", "packtools")

#: Go-style names of the original implementation → our names.
ALIASES = {
    "prom.QueryPromQL": "prom.query_promql",
    "net.ProbeTCP": "net.probe_tcp",
    "http.ProbeHTTP": "http.probe_http",
    "dns.ProbeDNS": "dns.probe_dns",
    "files.TailFile": "files.tail_file",
    "files.DiskUsage": "files.disk_usage",
    "procs.ListProcesses": "procs.list_processes",
    "journal.ReadJournal": "journal.read_journal",
    "skills.ReadSkill": "catalogue.read_skill",
    "skills.SearchSkills": "catalogue.search_skills",
}

ENTRY_POINT_GROUP = "ongrid_skills.builtins"

#: The package whose modules hold our built-ins. It is imported by name, never statically: this
#: resolver is the one place that loads modules by name, so that skill formats import no built-in.
BUILTINS_PACKAGE = "ongrid_skills.builtins"

#: A built-in skill function: ``fn(ctx, **args)``, sync or async (see builtins/base.py).
Builtin = Callable[..., Any]


@lru_cache(maxsize=1)
def _ours() -> dict[str, Builtin]:
    found: dict[str, Builtin] = {}
    for module_name in MODULES:
        try:
            module = importlib.import_module(f"{BUILTINS_PACKAGE}.{module_name}")
        except ImportError:
            continue
        for name in getattr(module, "__all__", ()):
            found[f"{module_name}.{name}"] = getattr(module, name)
    return found


def resolve(impl: str) -> tuple[Builtin | None, str | None]:
    """(callable, None) or (None, why it is unavailable)."""
    name = ALIASES.get(impl, impl)
    fn = _ours().get(name)
    if fn is not None:
        return fn, None
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in (impl, name):
            try:
                loaded = ep.load()
            except Exception as exc:
                return None, f"builtin:{impl} failed to import: {exc}"
            if not callable(loaded):
                return None, f"builtin:{impl} is not callable"
            return loaded, None
    return None, f"unknown impl builtin:{impl}"


def names() -> list[str]:
    """Every impl name our own built-in modules provide (aliases and entry points left out)."""
    return sorted(_ours())


def bundled_dir() -> str:
    """The folder of the bundled SKILL.md catalogue, shipped inside the built-ins package."""
    return str(importlib.resources.files(BUILTINS_PACKAGE).joinpath("bundled"))
