"""The MCP door (SPEC §10): ``create_mcp_server(manager, ...)`` on the SDK's low-level Server.

Served over stdio by ``ongrid-skills mcp`` (:func:`serve_stdio`) and over streamable HTTP at
``/mcp`` by ``serve`` (:class:`McpHttp`, :class:`McpEndpoint`). Nothing here decides policy:

- ``tools/list`` is the persona's offered set (:func:`ongrid_skills.toolspec.offered`, minus
  what the caller's role may never run) exported with :func:`toolspec.export` ``"mcp"``, plus the
  door's own ``get_execution`` tool.
- ``tools/call`` goes through ``Manager.submit`` like every door: gate, approvals, audit, events.
  The call's live timeline is forwarded while it runs (stderr lines → ``notifications/message``,
  progress → ``notifications/progress``); the client cancelling the request cancels the execution,
  which kills the skill's process group.
- A call that one human confirmation would let run is confirmed by elicitation when the client
  supports it (accept = the caller's explicit confirmation; decline = a recorded rejection);
  otherwise, and always for dangerous calls, the pending approval is returned.
- After a reload, each connection whose offered set changed gets
  ``notifications/tools/list_changed`` (``subscriptions/listen`` streams on 2026-07-28 clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ongrid_skills import toolspec
from ongrid_skills.errors import InvalidArgs, NotFound, SkillError, UnknownSkill, Violation
from ongrid_skills.execution.records import Event, Execution, Status
from ongrid_skills.governance.gate import one_confirmation_suffices, role_permits
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager, args_digest
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA
from ongrid_skills.skills.registry import Registry
from ongrid_skills.types import Role

LOG = logging.getLogger("ongrid_skills.mcp")
Ctx = ServerRequestContext[Any, Any]
GET_EXECUTION = "get_execution"
MAX_WAIT_SECONDS = 60
ELICIT_TIMEOUT_SECONDS = 600.0
CONFIRM_KEY = "confirm"
DECLINED = "declined in the MCP client"
DISMISSED = "dismissed in the MCP client"
_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
_MIN_LEVEL = "ongrid_skills.log_level"  # key in Connection.state (logging/setLevel)

GET_EXECUTION_TOOL: dict[str, Any] = {
    "name": GET_EXECUTION,
    "title": "get execution",
    "description": (
        "Status and outcome of an ongrid-skills execution, e.g. one that waited for approval: "
        "the skill's verbatim result when it succeeded, the error envelope when it failed, its "
        "status while it waits or runs. `id` is the execution id or the approval id."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "execution id or approval id"},
            "wait_seconds": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_WAIT_SECONDS,
                "description": "wait up to this long for the call to end (default 0: answer now)",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    "annotations": {
        "title": "get execution",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


# ---- what a caller is offered -------------------------------------------------------------------
def offered_tools(registry: Registry, persona: str | None, role: Role | None) -> list[Skill]:
    """The persona's offered tools (the tool-export function), minus classes the role may not run.

    No persona means the ``default`` persona (read-only), as everywhere a model is served.
    """
    who = registry.persona(persona or DEFAULT_PERSONA.name)
    skills = toolspec.offered(registry, who)
    return [s for s in skills if role_permits(role, s.skill_class) and s.name != GET_EXECUTION]


def tool_definition(skill: Skill) -> dict[str, Any]:
    """The MCP definition of a skill: exactly the tool export (:func:`toolspec.export`), so
    ``tools/list`` and ``GET /v1/personas/{name}/tools?format=mcp`` never differ."""
    return toolspec.export(skill, "mcp")


def _fingerprint(tools: list[dict[str, Any]]) -> str:
    raw = json.dumps(tools, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


# ---- results ------------------------------------------------------------------------------------
def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def error_result(error: dict[str, Any]) -> types.CallToolResult:
    """A refusal before anything ran, as the model's error envelope (SPEC §7)."""
    body = {"error": error, "exit_code": None, "stderr_tail": ""}
    return types.CallToolResult(
        content=[_text(json.dumps(body, ensure_ascii=False))], is_error=True
    )


def execution_result(execution: Execution, manager: Manager) -> types.CallToolResult:
    """Verbatim stdout (+ structuredContent for an object), the envelope on failure, or status."""
    status = execution.status
    if status is Status.SUCCEEDED and execution.result_text is not None:
        structured = execution.result if isinstance(execution.result, dict) else None
        return types.CallToolResult(
            content=[_text(execution.result_text)], structured_content=structured
        )
    if status is Status.PENDING_APPROVAL:
        return _pending_result(execution, manager)
    if status is Status.RUNNING:
        body = {"status": "running", "execution_id": execution.id}
        return types.CallToolResult(content=[_text(json.dumps(body))], structured_content=body)
    return types.CallToolResult(content=[_text(execution.envelope())], is_error=True)


def _pending_result(execution: Execution, manager: Manager) -> types.CallToolResult:
    approval_id = execution.approval_id or ""
    needed, collected = 1, 0
    with contextlib.suppress(SkillError):
        approval = manager.desk.get(approval_id)
        needed, collected = approval.signatures_required, len(approval.approvals)
    what = (
        "one human confirmation"
        if needed == 1
        else f"{needed} distinct human signers (admins), {collected} signed so far"
    )
    sentence = (
        f"Not run yet: {execution.skill} waits for {what}. Approve it on the ongrid-skills "
        f"server of this data dir with `ongrid-skills approvals approve {approval_id}` or "
        f"`POST /v1/approvals/{approval_id}/approve`, then call {GET_EXECUTION} with "
        f'{{"id": "{execution.id}"}} for the outcome.'
    )
    structured = {
        "status": "pending_approval",
        "approval_id": approval_id,
        "execution_id": execution.id,
        "signatures_required": needed,
        "signatures_collected": collected,
    }
    return types.CallToolResult(
        content=[_text(execution.envelope()), _text(sentence)], structured_content=structured
    )


# ---- the door -----------------------------------------------------------------------------------
@dataclass
class _Confirmations:
    """Signed, one-time ``request_state`` of 2026-era confirmation round trips: it binds the
    answer to the skill definition, the exact args, the caller and the persona."""

    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    used: dict[str, float] = field(default_factory=dict)  # nonce -> expiry

    def _mac(self, body: str, binding: str) -> str:
        return hmac.new(self.secret, f"{body}|{binding}".encode(), hashlib.sha256).hexdigest()

    def issue(self, binding: str) -> str:
        body = f"{secrets.token_urlsafe(12)}.{int(time.time() + ELICIT_TIMEOUT_SECONDS)}"
        return f"{body}.{self._mac(body, binding)}"

    def redeem(self, state: str, binding: str) -> bool:
        now = time.time()
        self.used = {nonce: t for nonce, t in self.used.items() if t > now}
        nonce, _, rest = state.partition(".")
        expires, _, mac = rest.partition(".")
        if not expires.isdigit() or not hmac.compare_digest(
            mac, self._mac(f"{nonce}.{expires}", binding)
        ):
            return False
        if int(expires) <= now or nonce in self.used:
            return False
        self.used[nonce] = float(expires)
        return True


@dataclass
class _Peer:
    """A handshake-era connection: whose view it lists, and the fingerprint it last saw."""

    key: tuple[str, Role]
    seen: str


@dataclass
class _Listen:
    """2026-era ``subscriptions/listen`` streams of one view (persona, role)."""

    handler: ListenHandler
    bus: InMemorySubscriptionBus
    seen: str


@dataclass
class _Door:
    manager: Manager
    principal_for: Callable[[Ctx], Principal]
    persona_for: Callable[[Ctx], str | None]
    peers: dict[Connection, _Peer] = field(default_factory=dict)
    listens: dict[tuple[str, Role], _Listen] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    confirmations: _Confirmations = field(default_factory=_Confirmations)

    # -- views ---------------------------------------------------------------------------------
    def _persona(self, ctx: Ctx) -> str:
        """Whose view and mode apply: the door's persona, else the read-only ``default``."""
        name = self.persona_for(ctx) or DEFAULT_PERSONA.name
        if name not in self.manager.registry.personas:
            raise MCPError(types.INVALID_PARAMS, f"unknown persona {name!r}")
        return name

    def _view(self, key: tuple[str, Role], registry: Registry) -> list[dict[str, Any]]:
        persona, role = key
        if persona not in registry.personas:
            return []
        tools = [tool_definition(s) for s in offered_tools(registry, persona, role)]
        return [*tools, GET_EXECUTION_TOOL]

    def _watch(self, ctx: Ctx, key: tuple[str, Role], seen: str) -> None:
        """Remember a handshake-era connection for list_changed, until it closes."""
        connection = getattr(ctx.session, "_connection", None)  # SDK 2.x keeps it private
        if not isinstance(connection, Connection):
            return
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return  # per-request connections; 2026 clients listen with subscriptions/listen
        if connection not in self.peers:
            connection.exit_stack.callback(self.peers.pop, connection, None)
        self.peers[connection] = _Peer(key, seen)

    # -- handlers ------------------------------------------------------------------------------
    async def initialized(self, ctx: Ctx, _params: types.NotificationParams) -> None:
        with contextlib.suppress(MCPError):
            key = (self._persona(ctx), self.principal_for(ctx).role)
            self._watch(ctx, key, _fingerprint(self._view(key, self.manager.registry)))

    async def list_tools(
        self, ctx: Ctx, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        key = (self._persona(ctx), self.principal_for(ctx).role)
        tools = self._view(key, self.manager.registry)
        self._watch(ctx, key, _fingerprint(tools))
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        connection = getattr(ctx.session, "_connection", None)
        if isinstance(connection, Connection):
            connection.state[_MIN_LEVEL] = params.level
        return types.EmptyResult()

    async def listen(
        self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        key = (self._persona(ctx), self.principal_for(ctx).role)
        entry = self.listens.get(key)
        if entry is None:
            bus = InMemorySubscriptionBus()
            seen = _fingerprint(self._view(key, self.manager.registry))
            entry = self.listens[key] = _Listen(ListenHandler(bus), bus, seen)
        return await entry.handler(ctx, params)

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        principal = self.principal_for(ctx)
        persona = self._persona(ctx)
        args: Any = params.arguments if params.arguments is not None else {}
        if params.name == GET_EXECUTION:
            return await self._get_execution(ctx, args)
        name = params.name
        confirm = False
        skill = self.manager.registry.skills.get(name)
        if skill is not None and self._one_confirmation_runs(skill, persona, principal, args):
            how = _elicitation(ctx)
            answer: str | None = None
            if how == "request":
                answer = await _elicit(ctx, skill, persona, args)
            elif how == "round_trip":
                binding = json.dumps(
                    [name, skill.definition_hash, args_digest(args), principal.name, persona]
                )
                if not params.input_responses:
                    message, schema = _confirmation_form(skill, persona, args)
                    form = types.ElicitRequestFormParams(message=message, requested_schema=schema)
                    return types.InputRequiredResult(
                        input_requests={CONFIRM_KEY: types.ElicitRequest(params=form)},
                        request_state=self.confirmations.issue(binding),
                    )
                reply = params.input_responses.get(CONFIRM_KEY)
                state = params.request_state or ""
                if not isinstance(reply, types.ElicitResult) or not self.confirmations.redeem(
                    state, binding
                ):
                    raise MCPError(
                        types.INVALID_PARAMS,
                        "this confirmation is not for this call (other args, expired or used)",
                    )
                answer = _verdict(reply)
            if answer == "accept":
                confirm = True
            elif answer is not None:
                return await self._decline(name, args, principal, persona, answer)
        try:
            execution = await self.manager.submit(
                name, args, principal=principal, persona=persona, confirm=confirm, wait=False
            )
        except UnknownSkill:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}") from None
        except SkillError as exc:
            return error_result(exc.to_dict())
        if confirm:
            self._audit_confirmation(execution, principal)
        if not execution.status.final and execution.status is not Status.PENDING_APPROVAL:
            await self._follow(ctx, execution, principal)
        return execution_result(execution, self.manager)

    # -- confirmation ----------------------------------------------------------------------------
    def _one_confirmation_runs(
        self, skill: Skill, persona: str, principal: Principal, args: Any
    ) -> bool:
        """Whether the gate asks for exactly the caller's own confirmation (never for dangerous)."""
        who = self.manager.registry.persona(persona)
        return one_confirmation_suffices(skill, who, principal, args)

    async def _decline(
        self, name: str, args: Any, principal: Principal, persona: str, answer: str
    ) -> types.CallToolResult:
        """A "no" in the client: the request is created and closed as rejected, on the record."""
        try:
            execution = await self.manager.submit(
                name, args, principal=principal, persona=persona, wait=False
            )
            if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
                reason = DECLINED if answer == "decline" else DISMISSED
                execution = self.manager.desk.decline(execution.approval_id, principal, reason)
        except UnknownSkill:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}") from None
        except SkillError as exc:
            return error_result(exc.to_dict())
        if not execution.status.final and execution.status is not Status.PENDING_APPROVAL:
            await self._follow(None, execution, principal)
        return execution_result(execution, self.manager)

    def _audit_confirmation(self, execution: Execution, principal: Principal) -> None:
        store = self.manager.store
        with store.tx() as conn:
            store.audit.append(
                conn,
                principal.name,
                "execution.confirmed",
                execution.id,
                {"skill": execution.skill, "args": execution.args, "via": "mcp elicitation"},
            )

    # -- running ---------------------------------------------------------------------------------
    async def _follow(self, ctx: Ctx | None, execution: Execution, principal: Principal) -> None:
        """Follow the call to its end, forwarding its timeline to ``ctx``'s client; the request
        being cancelled (by the client, or its connection closing) cancels the call."""
        timeline = self.manager.hub.get(execution.id)
        if timeline is None:
            return
        levels = _log_levels(ctx) if ctx is not None else frozenset()
        try:
            async for _seq, event in timeline.follow():
                if ctx is not None:
                    await _forward(ctx, execution.skill, event, levels)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._cancel(execution.id, principal)
            raise

    async def _cancel(self, execution_id: str, principal: Principal) -> None:
        with contextlib.suppress(SkillError):
            await self.manager.cancel(execution_id, principal)

    async def _get_execution(self, ctx: Ctx, args: Any) -> types.CallToolResult:
        problems = _get_execution_problems(args)
        if problems:
            return error_result(InvalidArgs(GET_EXECUTION, problems).to_dict())
        ident: str = args["id"]
        wait = int(args.get("wait_seconds", 0))
        try:
            execution = self.manager.get(ident)
        except NotFound:
            approval = self.manager.store.approvals.get(ident)
            if approval is None:
                return error_result(NotFound(f"unknown execution {ident!r}").to_dict())
            execution = self.manager.get(approval.execution_id)
        if not execution.status.final and wait > 0:
            with anyio.move_on_after(wait):
                await self._await_end(ctx, execution.id, execution.skill)
            execution = self.manager.get(execution.id)
        return execution_result(execution, self.manager)

    async def _await_end(self, ctx: Ctx, execution_id: str, skill: str) -> None:
        """Until the call is final: its live timeline when it runs in this process (forwarded),
        else the store (waiting for a signature, or run by another process on the data dir)."""
        levels = _log_levels(ctx)
        while not self.manager.get(execution_id).status.final:
            timeline = self.manager.hub.get(execution_id)
            if timeline is None:
                await anyio.sleep(0.2)
                continue
            async for _seq, event in timeline.follow():
                await _forward(ctx, skill, event, levels)

    # -- reloads ---------------------------------------------------------------------------------
    def on_reload(self, registry: Registry) -> None:
        with contextlib.suppress(RuntimeError):  # no running loop: nobody to tell
            self._spawn(self._announce(registry))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _announce(self, registry: Registry) -> None:
        """Tell each connection (and listen stream) whose offered set changed."""
        views: dict[tuple[str, Role], str] = {}

        def view(key: tuple[str, Role]) -> str:
            if key not in views:
                views[key] = _fingerprint(self._view(key, registry))
            return views[key]

        for connection, peer in list(self.peers.items()):
            now = view(peer.key)
            if now != peer.seen:
                peer.seen = now
                await connection.send_tool_list_changed()
        for key, entry in list(self.listens.items()):
            now = view(key)
            if now != entry.seen:
                entry.seen = now
                await entry.bus.publish(ToolsListChanged())

    def close(self) -> None:
        for entry in self.listens.values():
            entry.handler.close()
        for task in list(self.tasks):
            task.cancel()


def _get_execution_problems(args: Any) -> list[Violation]:
    if not isinstance(args, dict):
        return [Violation("", "must be an object")]
    problems = []
    ident = args.get("id")
    if not isinstance(ident, str) or not ident or len(ident) > 200:
        problems.append(Violation("/id", "must be a non-empty string (≤ 200 characters)"))
    wait = args.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_SECONDS:
        problems.append(Violation("/wait_seconds", f"must be an integer 0..{MAX_WAIT_SECONDS}"))
    extra = sorted(set(args) - {"id", "wait_seconds"})
    problems.extend(Violation(f"/{k}", "unknown property") for k in extra)
    return problems


# ---- talking back to the client ----------------------------------------------------------------
def _elicitation(ctx: Ctx) -> str | None:
    """How this client can be asked: ``request`` (a server request, handshake era),
    ``round_trip`` (an input-required result, 2026 era), or None (form elicitation unsupported)."""
    caps = ctx.session.client_capabilities
    support = caps.elicitation if caps is not None else None
    if support is None or (support.form is None and support.url is not None):
        return None  # `elicitation: {}` (2025-06-18) means form
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "round_trip"
    return "request" if ctx.session.can_send_request else None


def _confirmation_form(skill: Skill, persona: str, args: Any) -> tuple[str, dict[str, Any]]:
    """What the human sees: skill, class, persona and the exact args; one checkbox to confirm."""
    message = (
        f"Run the {skill.skill_class.value} skill {skill.name} (persona {persona}) "
        f"with exactly these args?\n\n"
        f"{json.dumps(args, indent=2, ensure_ascii=False)}\n\n{skill.description}"
    )
    schema = {
        "type": "object",
        "properties": {
            "confirm": {
                "type": "boolean",
                "title": f"Run {skill.name}",
                "description": f"I confirm this {skill.skill_class.value} call, with these args.",
                "default": False,
            }
        },
        "required": ["confirm"],
    }
    return message, schema


def _verdict(answer: types.ElicitResult) -> str:
    """``accept`` only when the box was ticked; an unticked accept is a ``decline``."""
    if answer.action == "accept":
        return "accept" if (answer.content or {}).get("confirm") is True else "decline"
    return answer.action


async def _elicit(ctx: Ctx, skill: Skill, persona: str, args: Any) -> str | None:
    """Ask the human; ``accept`` (confirmed), ``decline``, ``cancel``, or None (no answer)."""
    message, schema = _confirmation_form(skill, persona, args)
    try:
        with anyio.fail_after(ELICIT_TIMEOUT_SECONDS):
            answer = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
    except (MCPError, ValidationError, TimeoutError) as exc:
        LOG.info("no answer to the confirmation of %s (%s): it waits for approval", skill.name, exc)
        return None
    return _verdict(answer)


def _log_levels(ctx: Ctx) -> frozenset[types.LoggingLevel]:
    levels = allowed_log_levels(ctx.protocol_version, ctx.meta)
    connection = getattr(ctx.session, "_connection", None)
    floor = connection.state.get(_MIN_LEVEL) if isinstance(connection, Connection) else None
    if floor in _LEVELS:
        levels = levels & frozenset(_LEVELS[_LEVELS.index(floor) :])
    return levels


async def _forward(
    ctx: Ctx, skill: str, event: Event, levels: frozenset[types.LoggingLevel]
) -> None:
    """One timeline event to the client: stderr → log message, progress → progress. Best effort:
    a client gone away cancels the request anyway."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await _send_event(ctx, skill, event, levels)


async def _send_event(
    ctx: Ctx, skill: str, event: Event, levels: frozenset[types.LoggingLevel]
) -> None:
    if event.type == "progress":
        data = event.data
        total = data.get("total")
        await ctx.session.report_progress(
            float(data["progress"]),
            float(total) if total is not None else None,
            data.get("message"),
        )
        return
    if event.type == "stderr":
        level: types.LoggingLevel = "info"
        text = str(event.data.get("line", ""))
    elif event.type == "stderr_truncated":
        level = "warning"
        text = "[stderr truncated: over 1 MiB, the rest is not forwarded]"
    else:
        return
    if level not in levels:
        return
    notification = types.LoggingMessageNotification(
        params=types.LoggingMessageNotificationParams(level=level, logger=skill, data=text)
    )
    await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


# ---- the server ---------------------------------------------------------------------------------
class _OngridServer(Server[Any]):
    """Advertises ``tools.listChanged`` whoever builds the initialization options (the HTTP
    session manager builds them with the defaults)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


def create_mcp_server(
    manager: Manager,
    *,
    persona: str | None = None,
    principal_for: Callable[[Ctx], Principal],
    persona_for: Callable[[Ctx], str | None] | None = None,
) -> Server[Any]:
    """A low-level MCP server over ``manager``.

    ``principal_for(ctx)`` says who makes each request; ``persona_for(ctx)`` whose view it is
    (default: the fixed ``persona``; None = the bundled read-only ``default`` persona). The
    server registers its reload listener while it runs (its lifespan).
    """
    door = _Door(manager, principal_for, persona_for or (lambda _ctx: persona))

    @asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        manager.reload_listeners.append(door.on_reload)
        try:
            yield {}
        finally:
            with contextlib.suppress(ValueError):
                manager.reload_listeners.remove(door.on_reload)
            door.close()

    def input_schema(name: str) -> dict[str, Any] | None:
        skill = manager.registry.skills.get(name)
        return toolspec.object_schema(skill.schema) if skill is not None else None

    server = _OngridServer(
        "ongrid-skills",
        version=_version(),
        title="ongrid-skills",
        instructions=(
            "Operations skills, gated by class and persona. Calls that need a human confirmation "
            f"or signatures answer with a pending approval; follow up with {GET_EXECUTION}."
        ),
        lifespan=lifespan,
        get_tool_input_schema=input_schema,
        on_list_tools=door.list_tools,
        on_call_tool=door.call_tool,
        on_subscriptions_listen=door.listen,
    )
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, door.set_level)
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, door.initialized
    )
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("ongrid-skills")
    except PackageNotFoundError:  # pragma: no cover
        return "0"


# ---- transports ---------------------------------------------------------------------------------
async def serve_stdio(manager: Manager, principal: Principal, persona: str | None = None) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes stdin."""
    server = create_mcp_server(manager, persona=persona, principal_for=lambda _ctx: principal)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _http_principal(ctx: Ctx) -> Principal:
    state = getattr(ctx.request, "state", None)
    principal = getattr(state, "principal", None)
    if not isinstance(principal, Principal):  # the AuthGate always sets it before /mcp
        raise MCPError(types.INVALID_REQUEST, "unauthenticated request")
    return principal


def _http_persona(ctx: Ctx) -> str | None:
    query = getattr(ctx.request, "query_params", None)
    value = query.get("persona") if query is not None else None
    return value or None


class McpHttp:
    """The streamable HTTP door of one app lifespan: its MCP server and session manager."""

    def __init__(self, manager: Manager) -> None:
        self.server = create_mcp_server(
            manager, principal_for=_http_principal, persona_for=_http_persona
        )
        self.sessions = StreamableHTTPSessionManager(app=self.server)

    def run(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Enter for the app's lifetime (inside the FastAPI lifespan)."""
        return self.sessions.run()

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get("state", {}).get("principal")
        if not isinstance(principal, Principal):
            body = {"error": {"code": "unauthorized", "message": "missing bearer token"}}
            await JSONResponse(body, status_code=401)(scope, receive, send)
            return
        # A session belongs to the principal that opened it: the SDK refuses (404) a request for
        # it made with another identity.
        token = AccessToken(token="", client_id=principal.name, scopes=[principal.role.value])
        scope["user"] = AuthenticatedUser(token)
        await self.sessions.handle_request(scope, receive, send)


class McpEndpoint:
    """ASGI endpoint mounted at ``/mcp``; finds the app's :class:`McpHttp` (``app.state.mcp``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        door: McpHttp | None = getattr(scope["app"].state, "mcp", None)
        if door is None:
            body = {"error": {"code": "unavailable", "message": "the MCP door is not running"}}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await door.handle(scope, receive, send)


def mcp_route(path: str = "/mcp") -> Route:
    """The route ``create_app`` mounts: every method of ``path`` to :class:`McpEndpoint`."""
    return Route(path, McpEndpoint(), include_in_schema=False)
