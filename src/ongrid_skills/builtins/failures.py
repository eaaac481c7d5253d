"""The expected failures of a built-in, each with the ``error.code`` its Execution carries.

::

    BuiltinFailure          builtin_failed      (host down, no such file, bad answer…)
    ├── ForbiddenPath       forbidden_path      (outside the readable roots, or the manager's own)
    └── ForbiddenTarget     forbidden_target    (a network target the operator's rules refuse)

Any other exception a built-in raises is a bug: its Execution fails with ``internal_error``.
This module imports nothing of the product, so every built-in module may import it.
"""

from __future__ import annotations

__all__ = ["BuiltinFailure", "ForbiddenPath", "ForbiddenTarget"]


class BuiltinFailure(Exception):
    """An expected failure of a built-in; its message is shown to the caller and the model, its
    ``code`` (the class's, or one given) is the execution's ``error.code``."""

    code = "builtin_failed"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ForbiddenPath(BuiltinFailure):
    """A path the built-ins may not touch: outside the readable roots, or the manager's own."""

    code = "forbidden_path"


class ForbiddenTarget(BuiltinFailure):
    """A network target the built-ins may not reach (deny list, allow list, metadata)."""

    code = "forbidden_target"
