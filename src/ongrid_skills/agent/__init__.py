"""The agent kernel (SPEC §8): an LLM tool-calling loop over the skills of one persona.

- :mod:`.providers`: OpenAI-compatible chat completions and Anthropic messages, via their SDKs.
- :mod:`.transcript`: the neutral transcript and its conversion per provider.
- :mod:`.loop`: :class:`AgentService` and :class:`AgentRun`, the loop itself.
- :mod:`.runs`: storage of runs, transcripts and event timelines.
"""

from ongrid_skills.agent.loop import AgentRun, AgentService, system_prompt
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
