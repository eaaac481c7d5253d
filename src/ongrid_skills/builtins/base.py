"""What a built-in (in-process) skill function receives, and how its schema is derived.

A built-in is a Python callable ``fn(ctx, **args)`` — async, or sync (then run in a worker
thread, never on the event loop). ``ctx`` gives it the manager's configuration and an event sink
for progress and log lines; the remaining parameters are the args, and their type hints and
defaults give the JSON schema when the SKILL.md declares none::

    async def probe_tcp(
        ctx: BuiltinContext,
        host: Annotated[str, Field(description="Host name or address.")],
        port: Annotated[int, Field(ge=1, le=65535)],
        timeout_ms: int = 2000,
    ) -> dict[str, Any]: ...

The return value must be JSON-serialisable; it is the call's result. Raise
:class:`BuiltinFailure` for an expected failure (unreachable host, missing file…): the call
fails with the failure's ``code`` (``builtin_failed``; ``forbidden_path`` / ``forbidden_target``
for a refusal by the operator's reach rules, see :mod:`ongrid_skills.builtins.reach`) and the
message; any other exception is an ``internal_error``.
A built-in sees the registry it runs against only as a :class:`Catalogue` (``ctx.registry``);
the registry finds built-ins by name (:mod:`ongrid_skills.skills.impls`), never by import.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ongrid_skills.builtins.failures import BuiltinFailure, ForbiddenPath, ForbiddenTarget
from ongrid_skills.builtins.reach import Reach
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.skills.search import SearchIndex

__all__ = [
    "BuiltinContext",
    "BuiltinFailure",
    "Catalogue",
    "Emit",
    "ForbiddenPath",
    "ForbiddenTarget",
    "PackPort",
    "PrepareRequest",
    "Prepared",
    "Reach",
    "ToolPorts",
    "request_hook",
]

Emit = Callable[[str, dict[str, Any]], None]


class PackPort(Protocol):
    """The pack service as ``install_skill`` sees it (the runtime implements it on a served
    manager, with the sources, signature rules and limits of ``pack install``): built-ins
    never import the packs library. Both raise the pack errors (``ongrid_skills.errors``)."""

    async def inspect(self, source: str) -> dict[str, Any]:
        """Fetch and check ``source``; its capability summary (``packs/summary.py``)."""
        ...

    async def install(self, source: str, actor: str, digest: str, why: str) -> dict[str, Any]:
        """Install ``source`` if it still has ``digest`` (``why``: what pinned it), make its
        skills offered (the registry reloaded), and answer what changed."""
        ...


@dataclass(slots=True)
class ToolPorts:
    """What a manager lends the built-ins that act on it (set by the runtime; None: absent,
    as in a local ``ongrid-skills run``)."""

    packs: PackPort | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request made ready for its signers by a built-in's request hook: the args the request
    freezes (the caller's, with what the hook pinned) and what its card shows (``preview``)."""

    args: dict[str, Any]
    preview: dict[str, Any]


#: A built-in's request hook: (the manager's ports, the caller's args) → :class:`Prepared`, or
#: a typed error that refuses the request. Run when the call needs approval, before the request
#: is recorded; set on the function as its ``prepare_request`` attribute.
PrepareRequest = Callable[[ToolPorts, dict[str, Any]], Awaitable[Prepared]]


def request_hook(fn: Any) -> PrepareRequest | None:
    """The request hook of the built-in ``fn`` (see :data:`PrepareRequest`), if it has one."""
    hook = getattr(fn, "prepare_request", None)
    return cast(PrepareRequest, hook) if callable(hook) else None


class Catalogue(Protocol):
    """What the catalogue tools read: the skills of one registry snapshot and its search index.

    A protocol, not the Registry class, so that built-ins never import the registry that loads
    them (the registry resolves built-ins by name, see :mod:`ongrid_skills.skills.impls`)."""

    @property
    def skills(self) -> Mapping[str, Skill]: ...

    def search_index(self) -> SearchIndex: ...

    def lookup(self, name: str) -> Skill | None: ...


@dataclass(slots=True)
class BuiltinContext:
    """``config``: the manager's config keys (``prometheus.url`` …); ``emit(kind, data)``:
    timeline events (``"stderr", {"line": ...}`` or ``"progress", {"progress", "total",
    "message"}``); ``registry``: the catalogue the call runs against (for catalogue tools);
    ``permits(skill)``: whether the caller may be offered that skill (the gate's answer);
    ``reach``: the paths and network targets the operator lets built-ins reach."""

    config: Mapping[str, str] = field(default_factory=dict)
    emit: Emit = field(default=lambda _kind, _data: None)
    registry: Catalogue | None = None
    persona: Persona | None = None  # the persona the call runs as, if any
    permits: Callable[[Skill], bool] = field(default=lambda _skill: True)
    reach: Reach = field(default_factory=Reach)
    ports: ToolPorts = field(default_factory=ToolPorts)  # what the manager lends built-ins
    caller: str | None = None  # who asked for the call (its execution's requester)

    def log(self, line: str) -> None:
        """Add one ``stderr`` line to the call's timeline (and its stderr tail)."""
        self.emit("stderr", {"line": line})

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """Add a ``progress`` event: ``done`` of ``total`` (when known), with a message."""
        data: dict[str, Any] = {"progress": done}
        if total is not None:
            data["total"] = total
        if message:
            data["message"] = message
        self.emit("progress", data)
