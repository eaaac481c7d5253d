"""The MCP server object (SPEC §10): ``create_mcp_server(manager, ...)`` on the SDK's low-level
Server, and its ``tools/list`` and ``tools/call`` handlers.

- ``tools/list`` answers the caller's view (:mod:`ongrid_skills.doors.mcp.tools`): whose persona
  comes from the door (stdio: ``--persona``; HTTP: ``?persona=``), whose role from the principal.
- ``tools/call`` goes through ``Manager.submit`` like every door: gate, approvals, audit, events.
  A call that one human confirmation would let run is first confirmed in the client when it can
  be asked (:mod:`~ongrid_skills.doors.mcp.confirmation`); a running call is followed to its end
  (:mod:`~ongrid_skills.doors.mcp.follow`); the answer is rendered by
  :mod:`~ongrid_skills.doors.mcp.results`.
- The server's lifespan registers the reload listener that sends ``list_changed``
  (:mod:`~ongrid_skills.doors.mcp.session`).
- ``resources/list``, ``resources/templates/list`` and ``resources/read`` serve the SKILL.md
  skills of the caller's view and their bundled files (:mod:`~ongrid_skills.doors.mcp.resources`).

This module never answers a permission question itself (the gate does, through the manager and
:func:`~ongrid_skills.governance.gate.one_confirmation_suffices`) and knows no transport:
:mod:`~ongrid_skills.doors.mcp.transports` serves the server it builds.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from ongrid_skills import toolspec
from ongrid_skills.doors.mcp.confirmation import Confirmations, ask, audit_confirmation, decline
from ongrid_skills.doors.mcp.follow import follow
from ongrid_skills.doors.mcp.get_execution import get_execution
from ongrid_skills.doors.mcp.resources import TEMPLATE, list_resources, read_resource
from ongrid_skills.doors.mcp.results import error_result, execution_result, unknown_tool
from ongrid_skills.doors.mcp.session import Ctx, Sessions, set_level
from ongrid_skills.doors.mcp.tools import GET_EXECUTION, View, fingerprint, view_tools
from ongrid_skills.errors import SkillError, UnknownSkill
from ongrid_skills.execution.records import Status
from ongrid_skills.governance.gate import one_confirmation_suffices
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA


@dataclass
class _Door:
    """The handlers of one server, over one manager."""

    manager: Manager
    principal_for: Callable[[Ctx], Principal]
    persona_for: Callable[[Ctx], str | None]
    sessions: Sessions = field(default_factory=Sessions)
    confirmations: Confirmations = field(default_factory=Confirmations)

    def _persona(self, ctx: Ctx) -> str:
        """Whose view and mode apply: the door's persona, else the read-only ``default``."""
        name = self.persona_for(ctx) or DEFAULT_PERSONA.name
        if name not in self.manager.registry.personas:
            raise MCPError(types.INVALID_PARAMS, f"unknown persona {name!r}")
        return name

    def _view(self, ctx: Ctx) -> View:
        return (self._persona(ctx), self.principal_for(ctx).role)

    def _one_confirmation_runs(
        self, skill: Skill, persona: str, principal: Principal, args: Any
    ) -> bool:
        """Whether the gate asks for exactly the caller's own confirmation (never for dangerous)."""
        who = self.manager.registry.persona(persona)
        return one_confirmation_suffices(skill, who, principal, args)

    async def initialized(self, ctx: Ctx, _params: types.NotificationParams) -> None:
        with contextlib.suppress(MCPError):
            view = self._view(ctx)
            seen = fingerprint(view_tools(self.manager.registry, view))
            self.sessions.watch(ctx, view, seen)

    async def list_tools(
        self, ctx: Ctx, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        view = self._view(ctx)
        tools = view_tools(self.manager.registry, view)
        self.sessions.watch(ctx, view, fingerprint(tools))
        return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        persona, role = self._view(ctx)
        cursor = params.cursor if params is not None else None
        return list_resources(self.manager.registry, persona, role, cursor)

    async def list_resource_templates(
        self, ctx: Ctx, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        self._view(ctx)  # an unknown persona is refused here too
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        persona, role = self._view(ctx)
        return read_resource(self.manager.registry, persona, role, params.uri)

    async def listen(
        self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await self.sessions.listen(ctx, params, self._view(ctx), self.manager.registry)

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        principal = self.principal_for(ctx)
        persona = self._persona(ctx)
        args: Any = params.arguments if params.arguments is not None else {}
        if params.name == GET_EXECUTION:
            return await get_execution(self.manager, ctx, args)
        name = params.name
        confirm = False
        skill = self.manager.registry.skills.get(name)
        if skill is not None and self._one_confirmation_runs(skill, persona, principal, args):
            answer = await ask(ctx, params, skill, persona, principal, args, self.confirmations)
            if isinstance(answer, types.InputRequiredResult):
                return answer
            if answer == "accept":
                confirm = True
            elif answer is not None:
                return await decline(self.manager, name, args, principal, persona, answer)
        try:
            execution = await self.manager.submit(
                name, args, principal=principal, persona=persona, confirm=confirm, wait=False
            )
        except UnknownSkill as exc:
            raise MCPError(types.INVALID_PARAMS, unknown_tool(name, exc)) from None
        except SkillError as exc:
            return error_result(exc.to_dict())
        if confirm:
            audit_confirmation(self.manager, execution, principal)
        if not execution.status.final and execution.status is not Status.PENDING_APPROVAL:
            await follow(self.manager, ctx, execution, principal)
        return execution_result(execution, self.manager)


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
    on_reload = door.sessions.on_reload

    @asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        manager.reload_listeners.append(on_reload)
        try:
            yield {}
        finally:
            with contextlib.suppress(ValueError):
                manager.reload_listeners.remove(on_reload)
            door.sessions.close()

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
        on_list_resources=door.list_resources,
        on_list_resource_templates=door.list_resource_templates,
        on_read_resource=door.read_resource,
        on_subscriptions_listen=door.listen,
    )
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
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
