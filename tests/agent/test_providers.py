"""The provider layer against scripted servers on loopback: the official SDKs over real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ongrid_skills.agent import ProviderConfig, ProviderError, Turn, UserText, make_provider
from tests.support.llm import API_KEY, FakeLLM, Reply, call
from tests.support.sockets import free_port

FLAVOURS = ("openai", "anthropic")


def complete(
    fake: FakeLLM | None,
    *,
    flavour: str = "openai",
    url: str | None = None,
    key: str = API_KEY,
    model: str = "m1",
    stream: bool = False,
    retries: int = 0,
    tools: list[dict[str, Any]] | None = None,
) -> tuple[Turn, list[str]]:
    async def main() -> tuple[Turn, list[str]]:
        config = ProviderConfig(
            provider=fake.flavour if fake else flavour,
            model=model,
            base_url=url or (fake.url if fake else None),
            api_key=key,
            max_retries=retries,
            timeout_seconds=10,
            stream=stream,
        )
        provider = make_provider(config)
        pieces: list[str] = []
        try:
            turn = await provider.complete(
                "You are a test.", [UserText("hello")], tools or [], pieces.append
            )
        finally:
            await provider.close()
        return turn, pieces

    return asyncio.run(main())


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_reply_with_text_and_tool_calls_is_read_whole_or_streamed(
    flavour: str, stream: bool
) -> None:
    planned = Reply(
        "Let me check both hosts.",
        [call("probe_tcp", {"host": "db-01", "port": 5432}), call("disk_usage", {})],
    )
    with FakeLLM([planned], flavour=flavour) as fake:
        turn, pieces = complete(fake, stream=stream)
    assert turn.text == "Let me check both hosts."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("probe_tcp", '{"host": "db-01", "port": 5432}'),
        ("disk_usage", "{}"),
    ]
    assert len({c.id for c in turn.tool_calls}) == 2
    assert "".join(pieces) == "Let me check both hosts."
    if stream:
        assert len(pieces) > 1  # the text arrived as it was produced
    sent = fake.request(0)
    assert sent["model"] == "m1"
    assert bool(sent.get("stream")) is stream
    assert fake.system(0) == "You are a test."


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tools_are_sent_in_the_providers_own_format(flavour: str) -> None:
    schema = {"type": "object", "properties": {"host": {"type": "string"}}}
    if flavour == "openai":
        tools = [
            {
                "type": "function",
                "function": {"name": "probe", "description": "d", "parameters": schema},
            }
        ]
    else:
        tools = [{"name": "probe", "description": "d", "input_schema": schema}]
    with FakeLLM([Reply("ok")], flavour=flavour) as fake:
        complete(fake, tools=tools)
    assert fake.request(0)["tools"] == tools


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_rate_limit_or_server_error_is_retried_with_backoff_then_succeeds(
    flavour: str, status: int
) -> None:
    busy = Reply(status=status, error="slow down", headers={"retry-after-ms": "20"})
    with FakeLLM([busy, busy, Reply("finally")], flavour=flavour) as fake:
        turn, _ = complete(fake, retries=3)
        assert turn.text == "finally"
        assert len(fake.requests) == 3
        retried = [h.get("x-stainless-retry-count") for h in fake.headers]
        assert retried == ["0", "1", "2"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_rate_limit_that_outlasts_the_retries_is_a_clear_error(flavour: str) -> None:
    busy = Reply(status=429, error="quota exceeded", headers={"retry-after-ms": "10"})
    with FakeLLM([busy, busy], flavour=flavour) as fake, pytest.raises(ProviderError) as caught:
        complete(fake, retries=1)
    assert caught.value.code == "provider_rate_limited"
    assert "429" in caught.value.message and "quota exceeded" in caught.value.message


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_rejected_api_key_says_so(flavour: str) -> None:
    with FakeLLM([Reply("never")], flavour=flavour) as fake, pytest.raises(ProviderError) as caught:
        complete(fake, key="sk-wrong", retries=2)
    assert caught.value.code == "provider_auth"
    assert caught.value.message.startswith("provider rejected the API key")
    assert len(fake.requests) == 1  # an auth failure is not retried


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unknown_model_says_model_not_found(flavour: str) -> None:
    with (
        FakeLLM([Reply("never")], flavour=flavour, models=("real-model",)) as fake,
        pytest.raises(ProviderError) as caught,
    ):
        complete(fake, model="no-such-model")
    assert caught.value.code == "model_not_found"
    assert caught.value.message.startswith("model not found: no-such-model")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_provider_that_is_down_is_unreachable_at_its_url(flavour: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" + ("/v1" if flavour == "openai" else "")
    with pytest.raises(ProviderError) as caught:
        complete(None, flavour=flavour, url=url, retries=1)
    assert caught.value.code == "provider_unreachable"
    assert caught.value.message.startswith(f"provider unreachable at {url}")


def test_openai_without_a_key_or_a_local_url_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError) as caught:
        make_provider(ProviderConfig("openai", "m1", None, None))
    assert caught.value.code == "provider_config"
    assert "OPENAI_API_KEY" in caught.value.message


def test_the_api_key_falls_back_to_the_providers_usual_variable() -> None:
    from ongrid_skills.settings import Settings

    env = {"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
    assert Settings.load(environ=env).llm_api_key == "sk-openai"
    anthropic = Settings.load(environ={**env, "ONGRID_LLM_PROVIDER": "anthropic"})
    assert anthropic.llm_api_key == "sk-ant"
    explicit = Settings.load(environ={**env, "ONGRID_LLM_API_KEY": "sk-mine"})
    assert explicit.llm_api_key == "sk-mine"
    assert "sk-" not in repr(explicit)  # never printed with the settings


def test_llm_settings_come_from_the_environment_and_are_checked() -> None:
    from ongrid_skills.errors import ConfigError
    from ongrid_skills.settings import Settings

    settings = Settings.load(
        environ={
            "ONGRID_LLM_PROVIDER": "Anthropic",
            "ONGRID_LLM_BASE_URL": "http://127.0.0.1:11434/v1",
            "ONGRID_LLM_MODEL": "llama3.1",
            "ONGRID_LLM_MAX_RETRIES": "0",
            "ONGRID_LLM_STREAM": "false",
        }
    )
    assert settings.llm_provider == "anthropic"
    assert settings.llm_base_url == "http://127.0.0.1:11434/v1"
    assert settings.llm_model == "llama3.1"
    assert settings.llm_max_retries == 0
    assert settings.llm_stream is False
    with pytest.raises(ConfigError):
        Settings.load(environ={"ONGRID_LLM_PROVIDER": "gemini"})
