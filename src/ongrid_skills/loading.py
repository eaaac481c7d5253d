"""The embedding entry points that read settings: :func:`load_registry`."""

from __future__ import annotations

from collections.abc import Iterable

from .discovery import LogSink
from .registry import Registry, build_registry
from .settings import Settings


def load_registry(
    external_dirs: Iterable[str] | None = None,
    persona_dirs: Iterable[str] | None = None,
    *,
    native_dirs: Iterable[str] | None = None,
    bundled: bool | None = None,
    settings: Settings | None = None,
    log: LogSink | None = None,
) -> Registry:
    """Load skills and personas. An omitted argument falls back to its ``ONGRID_*`` variable
    (``ONGRID_SKILLS_EXTERNAL_DIRS``, ``ONGRID_PERSONAS_DIRS``, ``ONGRID_SKILLS_NATIVE_DIRS``,
    ``ONGRID_BUNDLED_SKILLS``).

    Loader lines go to ``log`` (default: the ``ongrid_skills.loader`` logger at INFO).
    """
    base = settings or Settings.load()
    return build_registry(
        base.external_dirs if external_dirs is None else external_dirs,
        base.persona_dirs if persona_dirs is None else persona_dirs,
        native_dirs=base.native_dirs if native_dirs is None else native_dirs,
        bundled=base.bundled_skills if bundled is None else bundled,
        config=base.config,
        sink=log,
        default_timeout=base.default_timeout_seconds,
    )
