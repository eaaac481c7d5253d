"""Scripted LLM servers on loopback: an OpenAI-compatible ``/v1/chat/completions`` and an
Anthropic-compatible ``/v1/messages``, each a real HTTP server in a thread.

The server answers with the planned replies, in order (streamed as SSE when the request asks for
it), and records every request it receives, so a test asserts on exactly what the model was sent:
the tools offered, the system prompt, the tool results of the previous turn.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support.http import serve

API_KEY = "sk-test-key"
MODEL = "test-model"


@dataclass
class Reply:
    """One planned answer: text and/or tool calls, or an HTTP error (``status`` ≠ 200)."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, args dict or raw text)
    status: int = 200
    error: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


Planned = Reply | Callable[[dict[str, Any]], Reply]


def call(name: str, args: Any = None) -> tuple[str, Any]:
    return (name, {} if args is None else args)


class FakeLLM:
    def __init__(
        self,
        script: list[Planned] | None = None,
        *,
        flavour: str = "openai",
        key: str = API_KEY,
        models: tuple[str, ...] | None = None,
    ) -> None:
        self.flavour = flavour
        self.key = key
        self.models = models
        self.script: list[Planned] = list(script or [])
        #: Answers a request when the script is empty (e.g. :class:`PersonaScripts`).
        self.fallback: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        # Guards requests/headers/script and wakes wait_requests when a request arrives.
        self.lock = threading.Condition()
        self.served = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake.handle(self)

        self._serving = serve(Handler)
        self.server = self._serving.__enter__()
        self.port = self.server.server_address[1]

    # ---- test side -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The base URL a client is configured with (OpenAI's includes /v1)."""
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if self.flavour == "openai" else root

    def add(self, *replies: Planned) -> None:
        with self.lock:
            self.script.extend(replies)

    def request(self, n: int) -> dict[str, Any]:
        with self.lock:
            return self.requests[n]

    def wait_requests(self, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Block until ``count`` requests arrived (or fail after ``timeout`` s); return them."""
        with self.lock:
            if not self.lock.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(f"the fake LLM got {len(self.requests)} requests, not {count}")
            return list(self.requests)

    def close(self) -> None:
        self._serving.__exit__(None, None, None)

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- what the model saw, per flavour ----------------------------------------------------
    def tool_names(self, n: int) -> list[str]:
        body = self.request(n)
        if self.flavour == "openai":
            return [t["function"]["name"] for t in body.get("tools", [])]
        return [t["name"] for t in body.get("tools", [])]

    def system(self, n: int) -> str:
        body = self.request(n)
        if self.flavour == "openai":
            first = body["messages"][0]
            return str(first["content"]) if first["role"] == "system" else ""
        return str(body.get("system", ""))

    def tool_results(self, n: int) -> dict[str, str]:
        """tool call id → the content the model received, in request ``n``."""
        body = self.request(n)
        out: dict[str, str] = {}
        if self.flavour == "openai":
            for message in body["messages"]:
                if message["role"] == "tool":
                    out[message["tool_call_id"]] = message["content"]
            return out
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = block["content"]
        return out

    def results_by_tool(self, n: int) -> dict[str, str]:
        """tool name → the content the model received in request ``n`` (one call per name)."""
        names: dict[str, str] = {}
        for message in self.request(n)["messages"]:
            if self.flavour == "openai":
                for c in message.get("tool_calls") or []:
                    names[c["id"]] = c["function"]["name"]
            elif message["role"] == "assistant":
                for block in message["content"]:
                    if block.get("type") == "tool_use":
                        names[block["id"]] = block["name"]
        return {names[i]: content for i, content in self.tool_results(n).items()}

    # ---- server side -----------------------------------------------------------------------
    def handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        body = json.loads(h.rfile.read(length) or b"{}")
        expected = "/v1/chat/completions" if self.flavour == "openai" else "/v1/messages"
        with self.lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
            index = len(self.requests) - 1
            self.lock.notify_all()
        if h.path != expected:
            self._error(h, 404, f"no route {h.path}")
            return
        if not self._authorised(h):
            self._error(h, 401, "Incorrect API key provided")
            return
        if self.models is not None and body.get("model") not in self.models:
            self._error(h, 404, f"The model `{body.get('model')}` does not exist")
            return
        with self.lock:
            planned = self.script.pop(0) if self.script else self.fallback
            self.served += 1
        if planned is None:
            self._error(h, 400, f"the fake LLM has no reply planned for request {index}")
            return
        reply = planned(body) if callable(planned) else planned
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._error(h, reply.status, reply.error or "planned failure", reply.headers)
            return
        if body.get("stream"):
            self._stream(h, reply, index)
        else:
            self._json(h, 200, self._message(reply, index, body))

    def _authorised(self, h: BaseHTTPRequestHandler) -> bool:
        if self.flavour == "openai":
            return h.headers.get("authorization") == f"Bearer {self.key}"
        # Anthropic's SDK sends the key as x-api-key or, in recent versions, as a bearer token.
        bearer = h.headers.get("authorization") == f"Bearer {self.key}"
        return bearer or h.headers.get("x-api-key") == self.key

    def _error(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        if self.flavour == "openai":
            body: dict[str, Any] = {"error": {"message": message, "type": "error", "code": None}}
        else:
            body = {"type": "error", "error": {"type": "error", "message": message}}
        self._json(h, status, body, headers)

    def _json(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        raw = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(raw)))
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(raw)

    @staticmethod
    def _args(args: Any) -> str:
        return args if isinstance(args, str) else json.dumps(args)

    def _message(self, reply: Reply, index: int, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model", "fake")
        if self.flavour == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if reply.calls:
                message["tool_calls"] = [
                    {
                        "id": f"call_{index}_{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": self._args(args)},
                    }
                    for i, (name, args) in enumerate(reply.calls)
                ]
            return {
                "id": f"chatcmpl-{index}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if reply.calls else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for i, (name, args) in enumerate(reply.calls):
            parsed = json.loads(args) if isinstance(args, str) else args
            content.append(
                {"type": "tool_use", "id": f"toolu_{index}_{i}", "name": name, "input": parsed}
            )
        return {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if reply.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def _stream(self, h: BaseHTTPRequestHandler, reply: Reply, index: int) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("connection", "close")
        h.end_headers()
        events = (
            self._openai_chunks(reply, index)
            if self.flavour == "openai"
            else self._anthropic_events(reply, index)
        )
        for name, data in events:
            line = f"event: {name}\n" if name else ""
            h.wfile.write(f"{line}data: {data}\n\n".encode())
            h.wfile.flush()

    def _openai_chunks(self, reply: Reply, index: int) -> Iterator[tuple[str, str]]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, str]:
            body = {
                "id": f"chatcmpl-{index}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return "", json.dumps(body)

        yield chunk({"role": "assistant", "content": ""})
        for piece in _pieces(reply.text):
            yield chunk({"content": piece})
        for i, (name, args) in enumerate(reply.calls):
            raw = self._args(args)
            half = len(raw) // 2
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": f"call_{index}_{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": raw[:half]},
                        }
                    ]
                }
            )
            yield chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]})
        yield chunk({}, "tool_calls" if reply.calls else "stop")
        yield "", "[DONE]"

    def _anthropic_events(self, reply: Reply, index: int) -> Iterator[tuple[str, str]]:
        def event(name: str, **data: Any) -> tuple[str, str]:
            return name, json.dumps({"type": name, **data})

        usage = {"input_tokens": 1, "output_tokens": 0}
        yield event(
            "message_start",
            message={
                "id": f"msg_{index}",
                "type": "message",
                "role": "assistant",
                "model": "fake",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        )
        block = 0
        if reply.text:
            yield event(
                "content_block_start", index=block, content_block={"type": "text", "text": ""}
            )
            for piece in _pieces(reply.text):
                yield event(
                    "content_block_delta", index=block, delta={"type": "text_delta", "text": piece}
                )
            yield event("content_block_stop", index=block)
            block += 1
        for i, (name, args) in enumerate(reply.calls):
            raw = self._args(args)
            yield event(
                "content_block_start",
                index=block,
                content_block={
                    "type": "tool_use",
                    "id": f"toolu_{index}_{i}",
                    "name": name,
                    "input": {},
                },
            )
            half = len(raw) // 2
            for part in (raw[:half], raw[half:]):
                yield event(
                    "content_block_delta",
                    index=block,
                    delta={"type": "input_json_delta", "partial_json": part},
                )
            yield event("content_block_stop", index=block)
            block += 1
        yield event(
            "message_delta",
            delta={"stop_reason": "tool_use" if reply.calls else "end_turn", "stop_sequence": None},
            usage={"output_tokens": 1},
        )
        yield event("message_stop")


def _pieces(text: str, size: int = 7) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def llm_settings(fake: FakeLLM, **more: Any) -> dict[str, Any]:
    """The settings that point an agent (or a reviewer) at ``fake``, with no retries, and
    ``more`` on top."""
    return {
        "llm_provider": fake.flavour,
        "llm_base_url": fake.url,
        "llm_model": MODEL,
        "llm_api_key": API_KEY,
        "llm_max_retries": 0,
        **more,
    }


def system_of(body: dict[str, Any]) -> str:
    """The system prompt of an OpenAI-format request body."""
    messages = body.get("messages") or [{}]
    first = messages[0]
    return str(first.get("content") or "") if first.get("role") == "system" else ""


class PersonaScripts:
    """One scripted conversation per persona on one fake LLM: each request is answered from
    the script of the persona whose prompt opens its system prompt (``You are <name>.`` for
    :func:`~tests.support.skills.write_persona`'s personas), and recorded under that persona."""

    def __init__(self, fake: FakeLLM, scripts: dict[str, list[Planned]], **prompts: str) -> None:
        """``prompts``: how a persona's system prompt opens when not ``You are <name>.``."""
        self.scripts = {name: list(replies) for name, replies in scripts.items()}
        self.openings = {name: prompts.get(name, f"You are {name}.") for name in scripts}
        self.requests: dict[str, list[dict[str, Any]]] = {name: [] for name in scripts}
        fake.fallback = self.answer

    def persona_of(self, body: dict[str, Any]) -> str:
        system = system_of(body)
        for name, opening in self.openings.items():
            if system.startswith(opening):
                return name
        raise AssertionError(f"no scripted persona for the system prompt {system[:80]!r}")

    def answer(self, body: dict[str, Any]) -> Reply:
        name = self.persona_of(body)
        self.requests[name].append(body)
        script = self.scripts[name]
        if not script:
            return Reply(status=400, error=f"the script of {name} has no reply left")
        planned = script.pop(0)
        return planned(body) if callable(planned) else planned

    def tools(self, persona: str, n: int = 0) -> list[str]:
        """The tool names offered in that persona's request ``n``."""
        return [t["function"]["name"] for t in self.requests[persona][n].get("tools", [])]

    def system(self, persona: str, n: int = 0) -> str:
        return system_of(self.requests[persona][n])

    def results(self, persona: str, n: int) -> dict[str, str]:
        """tool name → the content that persona's model received in its request ``n``."""
        names: dict[str, str] = {}
        out: dict[str, str] = {}
        for message in self.requests[persona][n]["messages"]:
            for c in message.get("tool_calls") or []:
                names[c["id"]] = c["function"]["name"]
            if message["role"] == "tool":
                out[names[message["tool_call_id"]]] = message["content"]
        return out


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    """A scripted OpenAI-compatible LLM on loopback for one test (``fake.add(Reply(...))``)."""
    with FakeLLM() as server:
        yield server
