"""LLM providers: any OpenAI-compatible chat-completions endpoint, and Anthropic's Messages API.

Both go through the official SDKs (``openai``, ``anthropic``), imported on first use so that the
CLI's other commands never pay for them. A provider turns the neutral transcript into its own
format, sends it with the tools, and hands back one :class:`~.transcript.Turn`.

Retries with exponential backoff on 408/409/429/5xx and connection errors are the SDKs' own
(``max_retries``, honouring ``Retry-After``); what is still failing after them becomes a
:class:`ProviderError` with a message an operator can act on, mapped in one place for both SDKs.
A provider only talks to a model: it must never run a skill, touch the store or import a door.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ongrid_skills.agent.transcript import Part, ToolCall, Turn, to_anthropic, to_openai
from ongrid_skills.errors import SkillError
from ongrid_skills.settings import Settings

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from openai import AsyncOpenAI

#: Where a provider streams the text of an answer as it comes.
TextSink = Callable[[str], None]
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
#: An API key for local endpoints that need none (Ollama, LM Studio, vLLM without --api-key).
PLACEHOLDER_KEY = "not-needed"
NO_ANTHROPIC_KEY = "no API key for anthropic: set ONGRID_LLM_API_KEY or ANTHROPIC_API_KEY"


class ProviderError(SkillError):
    """The model could not be asked: bad key, unknown model, endpoint down, rate limited…

    ``code``: ``provider_auth``, ``model_not_found``, ``provider_unreachable``,
    ``provider_rate_limited``, ``provider_config`` or ``provider_error``.
    """

    code = "provider_error"

    def __init__(self, message: str, code: str = "provider_error") -> None:
        super().__init__(message)
        self.code = code


class Provider(Protocol):
    """One LLM endpoint: ``complete`` asks for the next turn of a transcript."""

    name: str  # openai | anthropic
    model: str
    base_url: str
    tool_format: str  # the toolspec export format of its tools

    async def complete(
        self,
        system: str,
        messages: Sequence[Part],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
    ) -> Turn: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Which provider, model and endpoint a run uses, and how patiently (from the settings)."""

    provider: str
    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_retries: int = 3
    timeout_seconds: float = 120
    stream: bool = True
    max_tokens: int = 4096

    @classmethod
    def from_settings(cls, settings: Settings, model: str) -> ProviderConfig:
        return cls(
            provider=settings.llm_provider,
            model=model,
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key,
            max_retries=settings.llm_max_retries,
            timeout_seconds=settings.llm_timeout_seconds,
            stream=settings.llm_stream,
            max_tokens=settings.llm_max_tokens,
        )


#: Builds the provider of a run (tests pass their own).
ProviderFactory = Callable[[ProviderConfig], Provider]


def make_provider(config: ProviderConfig) -> Provider:
    """The provider ``config`` names (``openai`` or ``anthropic``)."""
    if config.provider == "anthropic":
        return AnthropicProvider(config)
    if config.provider == "openai":
        return OpenAIProvider(config)
    raise ProviderError(
        f"unknown LLM provider {config.provider!r} (openai or anthropic)", "provider_config"
    )


def _detail(body: object, fallback: str) -> str:
    """The provider's own message, dug out of its error body."""
    for _ in range(3):
        if isinstance(body, dict):
            inner = body.get("error", body.get("message"))
            if isinstance(inner, str):
                return inner[:500]
            if inner is None:
                break
            body = inner
    return fallback[:500]


def _status_error(status: int, detail: str, model: str, url: str, retries: int) -> ProviderError:
    if status == 401:
        return ProviderError(
            f"provider rejected the API key (HTTP 401 from {url}: {detail})", "provider_auth"
        )
    if status == 403:
        return ProviderError(
            f"provider refused the request (HTTP 403 from {url}: {detail})", "provider_auth"
        )
    if status == 404:
        return ProviderError(
            f"model not found: {model} (HTTP 404 from {url}: {detail})", "model_not_found"
        )
    if status == 429:
        return ProviderError(
            f"provider rate limit: still HTTP 429 after {retries} retries ({detail})",
            "provider_rate_limited",
        )
    return ProviderError(f"provider error: HTTP {status} from {url}: {detail}")


def _failure(
    exc: Exception, sdk: Any, config: ProviderConfig, url: str, *, no_key: str | None = None
) -> ProviderError:
    """What an SDK's exception becomes, after the SDK's own retries.

    ``sdk`` is the ``openai`` or ``anthropic`` module: both raise the same shapes (a status
    error, a timeout — a kind of connection error, so tested first — and a connection error).
    ``no_key``: the message for an SDK that reports a missing key as "authentication method".
    """
    if isinstance(exc, sdk.APIStatusError):
        failed: Any = exc
        detail = _detail(failed.body, failed.message)
        return _status_error(failed.status_code, detail, config.model, url, config.max_retries)
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderError(
            f"provider timed out at {url} after {config.timeout_seconds} s",
            "provider_unreachable",
        )
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderError(
            f"provider unreachable at {url}: {exc.__cause__ or exc}", "provider_unreachable"
        )
    if no_key is not None and "authentication method" in str(exc):
        return ProviderError(no_key, "provider_config")
    return ProviderError(f"provider error: {exc}")


# ---- OpenAI-compatible ------------------------------------------------------------------------
class OpenAIProvider:
    """Chat completions with function tools (OpenAI, vLLM, Ollama, LM Studio, llama.cpp…)."""

    name = "openai"
    tool_format = "openai"

    def __init__(self, config: ProviderConfig) -> None:
        from openai import AsyncOpenAI  # noqa: PLC0415 - the SDKs load on first use

        self.config = config
        self.model = config.model
        key = config.api_key
        if not key:
            if config.base_url is None:
                raise ProviderError(
                    "no API key for openai: set ONGRID_LLM_API_KEY or OPENAI_API_KEY "
                    "(or ONGRID_LLM_BASE_URL for a local endpoint that needs none)",
                    "provider_config",
                )
            key = PLACEHOLDER_KEY
        self.base_url = (config.base_url or OPENAI_DEFAULT_URL).rstrip("/")
        self.client: AsyncOpenAI = AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_seconds,
        )

    async def complete(
        self,
        system: str,
        messages: Sequence[Part],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
    ) -> Turn:
        import openai  # noqa: PLC0415

        payload = cast(Any, to_openai(system, messages))
        offered = cast(Any, tools) if tools else openai.omit
        try:
            if self.config.stream:
                return await self._streamed(payload, offered, on_text)
            response = await self.client.chat.completions.create(
                model=self.model, messages=payload, tools=offered
            )
        except openai.OpenAIError as exc:
            raise _failure(exc, openai, self.config, self.base_url) from None
        if not response.choices:
            raise ProviderError(f"provider error: a reply without choices from {self.base_url}")
        choice = response.choices[0]
        message = choice.message
        calls: list[ToolCall] = []
        for n, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call: not ours
                continue
            calls.append(ToolCall(call.id or f"call_{n}", function.name, function.arguments or ""))
        text = message.content or ""
        if text and on_text is not None:
            on_text(text)
        return Turn(text, calls, choice.finish_reason)

    async def _streamed(self, payload: Any, offered: Any, on_text: TextSink | None) -> Turn:
        stream = await self.client.chat.completions.create(
            model=self.model, messages=payload, tools=offered, stream=True
        )
        text: list[str] = []
        pieces: dict[int, dict[str, Any]] = {}
        finish: str | None = None
        async with stream:
            async for chunk in stream:
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                        if on_text is not None:
                            on_text(delta.content)
                    for part in delta.tool_calls or []:
                        slot = pieces.setdefault(part.index, {"id": "", "name": "", "args": []})
                        if part.id:
                            slot["id"] = part.id
                        if part.function is not None:
                            if part.function.name:
                                slot["name"] = part.function.name
                            if part.function.arguments:
                                slot["args"].append(part.function.arguments)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        calls = [
            ToolCall(slot["id"] or f"call_{index}", slot["name"], "".join(slot["args"]))
            for index, slot in sorted(pieces.items())
            if slot["name"]
        ]
        return Turn("".join(text), calls, finish)

    async def close(self) -> None:
        await self.client.close()


# ---- Anthropic ----------------------------------------------------------------------------------
class AnthropicProvider:
    """Anthropic's Messages API with ``tool_use`` / ``tool_result`` blocks."""

    name = "anthropic"
    tool_format = "anthropic"

    def __init__(self, config: ProviderConfig) -> None:
        from anthropic import AsyncAnthropic  # noqa: PLC0415

        self.config = config
        self.model = config.model
        self.base_url = (config.base_url or ANTHROPIC_DEFAULT_URL).rstrip("/")
        key = config.api_key or (PLACEHOLDER_KEY if config.base_url else None)
        self.client: AsyncAnthropic = AsyncAnthropic(
            api_key=key,
            base_url=self.base_url,
            max_retries=config.max_retries,
            timeout=config.timeout_seconds,
        )

    async def complete(
        self,
        system: str,
        messages: Sequence[Part],
        tools: list[dict[str, Any]],
        on_text: TextSink | None = None,
    ) -> Turn:
        import anthropic  # noqa: PLC0415

        payload = cast(Any, to_anthropic(messages))
        offered = cast(Any, tools) if tools else anthropic.omit
        prompt = system if system else anthropic.omit
        try:
            if self.config.stream:
                async with self.client.messages.stream(
                    model=self.model,
                    max_tokens=self.config.max_tokens,
                    system=prompt,
                    messages=payload,
                    tools=offered,
                ) as stream:
                    async for event in stream:
                        if event.type == "text" and on_text is not None:
                            on_text(event.text)
                    message: Any = await stream.get_final_message()
            else:
                message = await self.client.messages.create(
                    model=self.model,
                    max_tokens=self.config.max_tokens,
                    system=prompt,
                    messages=payload,
                    tools=offered,
                )
        except (anthropic.AnthropicError, TypeError) as exc:
            no_key = NO_ANTHROPIC_KEY
            raise _failure(exc, anthropic, self.config, self.base_url, no_key=no_key) from None
        return self._turn(message, on_text if not self.config.stream else None)

    @staticmethod
    def _turn(message: Any, on_text: TextSink | None) -> Turn:
        text: list[str] = []
        calls: list[ToolCall] = []
        for n, block in enumerate(message.content or []):
            kind = getattr(block, "type", None)
            if kind == "text":
                text.append(block.text)
            elif kind == "tool_use":
                arguments = json.dumps(block.input, ensure_ascii=False)
                calls.append(ToolCall(block.id or f"toolu_{n}", block.name, arguments))
        joined = "".join(text)
        if joined and on_text is not None:
            on_text(joined)
        return Turn(joined, calls, getattr(message, "stop_reason", None))

    async def close(self) -> None:
        await self.client.close()
