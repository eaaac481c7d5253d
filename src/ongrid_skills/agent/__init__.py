"""The agent kernel (SPEC §8): an LLM tool-calling loop over the skills of one persona.

- :mod:`.kernel`: :class:`AgentService`, which starts, follows, resumes and closes runs (the
  REST routes and the terminal's ``chat`` use it).
- :mod:`.loop`: :class:`AgentRun`, the turn loop of one run.
- :mod:`.record`: the recording half of a run (transcript, status, events, audit).
- :mod:`.prompt`: the system prompt of a turn.
- :mod:`.providers`: OpenAI-compatible chat completions and Anthropic messages, via their SDKs.
- :mod:`.transcript`: the neutral transcript and its conversion per provider.
- :mod:`.runs`: storage of runs, transcripts and event timelines.

The agent stands on the manager; it must never import a door (the doors import it).
"""

from ongrid_skills.agent.kernel import AgentService
from ongrid_skills.agent.loop import AgentRun
from ongrid_skills.agent.prompt import system_prompt
from ongrid_skills.agent.providers import (
    AnthropicProvider,
    OpenAIProvider,
    Provider,
    ProviderConfig,
    ProviderError,
    make_provider,
)
from ongrid_skills.agent.runs import RunRecord, RunStatus, RunStore
from ongrid_skills.agent.transcript import Message, ToolCall, Turn

__all__ = [
    "AgentRun",
    "AgentService",
    "AnthropicProvider",
    "Message",
    "OpenAIProvider",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "ToolCall",
    "Turn",
    "make_provider",
    "system_prompt",
]
