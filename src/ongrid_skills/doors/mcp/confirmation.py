"""Asking the human in the MCP client to confirm one call, and what their answer does.

Owns the confirmation form (skill, class, persona, the exact args, one checkbox), how a client
can be asked (a server ``elicitation/create`` request in the handshake era, an input-required
result in the 2026 era), the signed one-time ``request_state`` that binds a round-trip answer to
the call it was asked for, the verdict of an answer, a "no" recorded as a rejected request, and
the audit line of a confirmed call.

It never decides whether a call needs (or may run after) a confirmation: that is
:func:`ongrid_skills.governance.gate.one_confirmation_suffices`, asked by the server before any
of this, and ``Manager.submit`` with ``confirm=True`` then goes through the gate again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ongrid_skills.doors.mcp.follow import follow
from ongrid_skills.doors.mcp.results import error_result, execution_result, unknown_tool
from ongrid_skills.doors.mcp.session import Ctx
from ongrid_skills.errors import SkillError, UnknownSkill
from ongrid_skills.execution.digests import args_digest
from ongrid_skills.execution.records import Execution, Status
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill

LOG = logging.getLogger("ongrid_skills.mcp")
ELICIT_TIMEOUT_SECONDS = 600.0
CONFIRM_KEY = "confirm"
DECLINED = "declined in the MCP client"
DISMISSED = "dismissed in the MCP client"


@dataclass
class Confirmations:
    """Signed, one-time ``request_state`` of 2026-era confirmation round trips: it binds the
    answer to the skill definition, the exact args, the caller and the persona."""

    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    used: dict[str, float] = field(default_factory=dict)  # nonce -> expiry

    def _mac(self, body: str, binding: str) -> str:
        return hmac.new(self.secret, f"{body}|{binding}".encode(), hashlib.sha256).hexdigest()

    def issue(self, binding: str) -> str:
        """A fresh state for the call ``binding`` names, valid until the elicitation times out."""
        body = f"{secrets.token_urlsafe(12)}.{int(time.time() + ELICIT_TIMEOUT_SECONDS)}"
        return f"{body}.{self._mac(body, binding)}"

    def redeem(self, state: str, binding: str) -> bool:
        """True once for a state issued for ``binding`` and not expired; False ever after."""
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


async def ask(
    ctx: Ctx,
    params: types.CallToolRequestParams,
    skill: Skill,
    persona: str,
    principal: Principal,
    args: Any,
    confirmations: Confirmations,
) -> str | types.InputRequiredResult | None:
    """The human's answer to "run this call?": ``accept``, ``decline``, ``cancel``, None (the
    client cannot be asked, or did not answer), or the input-required result that asks a
    2026-era client (its retry carries the answer and the state issued here)."""
    how = elicitation(ctx)
    if how == "request":
        return await elicit(ctx, skill, persona, args)
    if how != "round_trip":
        return None
    binding = json.dumps(
        [params.name, skill.definition_hash, args_digest(args), principal.name, persona]
    )
    if not params.input_responses:
        message, schema = confirmation_form(skill, persona, args)
        form = types.ElicitRequestFormParams(message=message, requested_schema=schema)
        return types.InputRequiredResult(
            input_requests={CONFIRM_KEY: types.ElicitRequest(params=form)},
            request_state=confirmations.issue(binding),
        )
    reply = params.input_responses.get(CONFIRM_KEY)
    state = params.request_state or ""
    if not isinstance(reply, types.ElicitResult) or not confirmations.redeem(state, binding):
        raise MCPError(
            types.INVALID_PARAMS,
            "this confirmation is not for this call (other args, expired or used)",
        )
    return verdict(reply)


def elicitation(ctx: Ctx) -> str | None:
    """How this client can be asked: ``request`` (a server request, handshake era),
    ``round_trip`` (an input-required result, 2026 era), or None (form elicitation unsupported)."""
    caps = ctx.session.client_capabilities
    support = caps.elicitation if caps is not None else None
    if support is None or (support.form is None and support.url is not None):
        return None  # `elicitation: {}` (2025-06-18) means form
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return "round_trip"
    return "request" if ctx.session.can_send_request else None


def confirmation_form(skill: Skill, persona: str, args: Any) -> tuple[str, dict[str, Any]]:
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


def verdict(answer: types.ElicitResult) -> str:
    """``accept`` only when the box was ticked; an unticked accept is a ``decline``."""
    if answer.action == "accept":
        return "accept" if (answer.content or {}).get("confirm") is True else "decline"
    return answer.action


async def elicit(ctx: Ctx, skill: Skill, persona: str, args: Any) -> str | None:
    """Ask the human; ``accept`` (confirmed), ``decline``, ``cancel``, or None (no answer)."""
    message, schema = confirmation_form(skill, persona, args)
    try:
        with anyio.fail_after(ELICIT_TIMEOUT_SECONDS):
            answer = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
    except (MCPError, ValidationError, TimeoutError) as exc:
        LOG.info("no answer to the confirmation of %s (%s): it waits for approval", skill.name, exc)
        return None
    return verdict(answer)


async def decline(
    manager: Manager, name: str, args: Any, principal: Principal, persona: str, answer: str
) -> types.CallToolResult:
    """A "no" in the client: the request is created and closed as rejected, on the record."""
    try:
        execution = await manager.submit(
            name, args, principal=principal, persona=persona, wait=False
        )
        if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
            reason = DECLINED if answer == "decline" else DISMISSED
            execution = manager.desk.decline(execution.approval_id, principal, reason)
    except UnknownSkill as exc:
        raise MCPError(types.INVALID_PARAMS, unknown_tool(name, exc)) from None
    except SkillError as exc:
        return error_result(exc.to_dict())
    if not execution.status.final and execution.status is not Status.PENDING_APPROVAL:
        await follow(manager, None, execution, principal)
    return execution_result(execution, manager)


def audit_confirmation(manager: Manager, execution: Execution, principal: Principal) -> None:
    """Record that ``principal`` confirmed this call in the client (``execution.confirmed``)."""
    store = manager.store
    with store.tx() as conn:
        store.audit.append(
            conn,
            principal.name,
            "execution.confirmed",
            execution.id,
            {"skill": execution.skill, "args": execution.args, "via": "mcp elicitation"},
        )
