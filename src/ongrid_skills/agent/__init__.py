"""The agent kernel (SPEC §8): an LLM tool-calling loop over the skills of one persona.

- :mod:`.kernel`: :class:`AgentService`, which starts, continues, cancels, follows, resumes and
  closes runs (every door uses it; :func:`open_agents` opens it in the served app's lifespan).
- :mod:`.loop`: :class:`AgentRun`, the turn loop of one run.
- :mod:`.steps`: the loop's steps as values, and a call's wait for its approval.
- :mod:`.events`: the typed events of a run (text deltas included), as every door follows them.
- :mod:`.delegation`: the kernel's ``delegate`` tool: child runs as another persona.
- :mod:`.function_model`: :class:`FunctionProvider`, an in-process scripted model.
- :mod:`.record`: the recording half of a run (transcript, status, events, audit).
- :mod:`.prompt`: the system prompt of a turn.
- :mod:`.providers`: OpenAI-compatible chat completions and Anthropic messages, via their SDKs.
- :mod:`.transcript`: the transcript's typed parts and their conversion per provider.
- :mod:`.runs`: storage of runs, transcripts and event timelines.

The agent stands on the manager; it must never import a door (the doors import it).
"""

from ongrid_skills.agent.events import (
    ApprovalPending,
    ChildEvent,
    RunDone,
    RunEvent,
    Said,
    TextDelta,
    ToolEnded,
    ToolOutput,
    ToolStarted,
    from_event,
    to_event,
)
from ongrid_skills.agent.function_model import FunctionProvider
from ongrid_skills.agent.kernel import AgentService, open_agents
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
from ongrid_skills.agent.transcript import (
    ApprovalWait,
    ModelReply,
    Part,
    ToolCall,
    ToolResult,
    Turn,
    UserText,
)

__all__ = [
    "AgentRun",
    "AgentService",
    "AnthropicProvider",
    "ApprovalPending",
    "ApprovalWait",
    "ChildEvent",
    "FunctionProvider",
    "ModelReply",
    "OpenAIProvider",
    "Part",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "RunDone",
    "RunEvent",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "Said",
    "TextDelta",
    "ToolCall",
    "ToolEnded",
    "ToolOutput",
    "ToolResult",
    "ToolStarted",
    "Turn",
    "UserText",
    "from_event",
    "make_provider",
    "open_agents",
    "system_prompt",
    "to_event",
]
