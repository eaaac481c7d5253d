"""The console the chat tests talk to: its agent on the scripted model, a hostile skill, and a
``commander`` persona that may ask for dangerous calls."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.browser import Console, console_server
from tests.support.hostile import write_hostile_skill
from tests.support.llm import FakeLLM, llm_settings
from tests.support.skills import write_persona


@contextmanager
def chat_console(base: Path, fake: FakeLLM) -> Iterator[Console]:
    extra = base / "more-personas"
    write_persona(extra, "commander", "dual-sign-required")
    llm = llm_settings(
        fake, llm_timeout_seconds=30, persona_dirs=(str(base / "personas"), str(extra))
    )
    with console_server(base, more_skills=write_hostile_skill, **llm) as served:
        yield served
