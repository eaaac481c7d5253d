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
fails with ``error.code = "builtin_failed"`` and the message; any other exception is an
``internal_error``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints

from pydantic import ConfigDict, create_model

if TYPE_CHECKING:
    from ..persona import Persona
    from ..registry import Registry

Emit = Callable[[str, dict[str, Any]], None]


class BuiltinFailure(Exception):
    """An expected failure of a built-in; its message is shown to the caller and the model."""


@dataclass(slots=True)
class BuiltinContext:
    """``config``: the manager's config keys (``prometheus.url`` …); ``emit(kind, data)``:
    timeline events (``"stderr", {"line": ...}`` or ``"progress", {"progress", "total",
    "message"}``); ``registry``: the registry the call runs against (for catalogue tools)."""

    config: Mapping[str, str] = field(default_factory=dict)
    emit: Emit = field(default=lambda _kind, _data: None)
    registry: Registry | None = None
    persona: Persona | None = None  # the persona the call runs as, if any

    def log(self, line: str) -> None:
        self.emit("stderr", {"line": line})

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        data: dict[str, Any] = {"progress": done}
        if total is not None:
            data["total"] = total
        if message:
            data["message"] = message
        self.emit("progress", data)


Builtin = Callable[..., Any]


def signature_schema(fn: Builtin) -> dict[str, Any]:
    """The JSON schema (Draft 2020-12, type object) of ``fn``'s parameters after ``ctx``."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.values())[1:]
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    schema: dict[str, Any] = model.model_json_schema()
    return _clean(schema)


def _clean(node: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` keys (noise for a model); keep everything else."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if isinstance(value, dict):
            out[key] = _clean(value)
        elif isinstance(value, list):
            out[key] = [_clean(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out
