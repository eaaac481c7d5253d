"""An in-process scripted model: :class:`FunctionProvider` answers each turn with a function.

Like pydantic-ai's ``FunctionModel``: the loop runs unchanged (prompt, tools, calls through the
manager, events, store), only the model is a Python function given what a real provider would
be sent (:class:`ModelCall`) and returning the :class:`~.transcript.Turn`. Its text is streamed to
the run in pieces, as a real provider streams it, so the ``text_delta`` events are real ones. It
is for fast loop tests beside the real-socket tests (a scripted OpenAI-compatible server), and for
trying a persona offline; it never opens a socket. Plug it in with ``provider_factory``::

    AgentService(manager, provider_factory=FunctionProvider.factory(answer))
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ongrid_skills.agent.providers import Provider, ProviderConfig, TextSink
from ongrid_skills.agent.transcript import Part, Turn


@dataclass(frozen=True, slots=True)
class ModelCall:
    """What the model is asked with: the system prompt, the transcript, the tools offered (in
    the OpenAI format), and the number of the request (from 0, per provider)."""

    system: str
    parts: tuple[Part, ...]
    tools: list[dict[str, Any]]
    index: int

    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


Answer = Callable[[ModelCall], Turn | Awaitable[Turn]]


def words(text: str) -> list[str]:
    """The pieces a text is streamed in: its words, each with the spaces after it."""
    pieces: list[str] = []
    for word in text.split(" "):
        if pieces:
            pieces[-1] += " "
        pieces.append(word)
    return [p for p in pieces if p]


class FunctionProvider:
    """A provider whose turns come from ``answer`` (sync or async)."""

    name = "function"
    tool_format = "openai"

    def __init__(
        self,
        answer: Answer,
        *,
        model: str = "function",
        pieces: Callable[[str], list[str]] = words,
    ) -> None:
        self.answer = answer
        self.model = model
        self.base_url = "in-process"
        self.pieces = pieces
        self.calls: list[ModelCall] = []

    @classmethod
    def factory(cls, answer: Answer) -> Callable[[ProviderConfig], Provider]:
        """A ``provider_factory`` giving each run a provider answering with ``answer``."""

        def make(config: ProviderConfig) -> Provider:
            return cls(answer, model=config.model)

        return make

    async def complete(
        self,
        system: str,
        messages: Sequence[Part],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
    ) -> Turn:
        call = ModelCall(system, tuple(messages), tools, len(self.calls))
        self.calls.append(call)
        answered = self.answer(call)
        turn = await answered if inspect.isawaitable(answered) else answered
        if on_text is not None:
            for piece in self.pieces(turn.text):
                on_text(piece)
                await asyncio.sleep(0)  # as a stream does: others run between the pieces
        return turn

    async def close(self) -> None:
        return None


def scripted(*turns: Turn) -> Answer:
    """An answer giving ``turns`` in order, one per request of the run (then an error)."""
    queue = list(turns)

    def answer(_call: ModelCall) -> Turn:
        if not queue:
            raise AssertionError("the scripted model has no turn left")
        return queue.pop(0)

    return answer
