"""The turn loop of one agent run (SPEC §8): a model drives the skills of one persona.

Each turn: the system prompt (:mod:`.prompt`), the transcript converted for the provider, and the
tools of the turn (the persona's offered set with deferral: above the threshold, the ``activation:
always`` tools plus ``search_skills``; what a search finds is mounted for the next turns). Each
step returns the next one as a value (:mod:`.steps`: ``AskModel`` → ``RunCalls`` → ``AskModel``… →
``End``). Every tool call goes through ``Manager.submit`` — the one path of every door: gate,
approvals, audit, events — as the principal ``agent:<run id>`` with the role of whoever started the
run (the stricter of role and persona applies). The calls of one turn run concurrently; their
results go back to the model verbatim (or as the error envelope). A call that needs approval pauses
the run (``waiting_approval``) until the request is decided; the model then sees the outcome. The
loop ends when the model answers without tool calls, or at the persona's ``max_turns``.

What happened is written down by :class:`~.record.RunRecorder`; the runs themselves are
created, tracked and recovered by :class:`~.kernel.AgentService`. This module must never import
the kernel (it sees it through :class:`RunHost`) or a door, and never decides a permission
itself: the gate (:mod:`ongrid_skills.governance.gate`) does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from ongrid_skills.agent import delegation
from ongrid_skills.agent.events import (
    TOOL_OUTPUT_KINDS,
    RunEvent,
    Said,
    ToolOutput,
    ToolOutputKind,
    ToolStarted,
)
from ongrid_skills.agent.prompt import system_prompt
from ongrid_skills.agent.providers import Provider, ProviderConfig, ProviderError, ProviderFactory
from ongrid_skills.agent.record import RunRecorder
from ongrid_skills.agent.runs import RunRecord, RunStatus, RunStore
from ongrid_skills.agent.steps import AskModel, End, RunCalls, Step, wait_final
from ongrid_skills.agent.transcript import (
    SENT_KINDS,
    ApprovalWait,
    ModelReply,
    Part,
    ToolCall,
    ToolResult,
    error_envelope,
)
from ongrid_skills.errors import SkillError
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.governance.gate import one_confirmation_suffices, role_permits
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import Persona
from ongrid_skills.toolspec import SEARCH_TOOL, Toolbag, export_all, ranked_instructions
from ongrid_skills.types import Role

LOG = logging.getLogger("ongrid_skills.agent")

#: The terminal's inline confirmation: (skill, args) → yes or no.
Confirm = Callable[[Skill, Any], Awaitable[bool]]


class RunHost(Protocol):
    """What a run needs from the service that owns it (:class:`~.kernel.AgentService`)."""

    m: Manager
    runs: RunStore
    hub: EventHub
    provider_factory: ProviderFactory
    poll_seconds: float
    live: dict[str, AgentRun]
    #: Set while the service shuts down; with ``resumable``, waiting runs are kept waiting.
    closing: bool
    resumable: bool

    def create(
        self,
        persona: str,
        requester: Principal,
        *,
        parent: AgentRun | None = None,
        call_id: str | None = None,
    ) -> AgentRun: ...

    def drive(self, run: AgentRun, message: str) -> asyncio.Task[RunRecord]: ...


class AgentRun:
    """One conversation: its transcript, its tools, its event timeline."""

    def __init__(
        self,
        service: RunHost,
        record: RunRecord,
        config: ProviderConfig,
        *,
        messages: list[Part] | None = None,
        seq: int = 0,
        confirm: Confirm | None = None,
        human: Principal | None = None,
    ) -> None:
        self.service = service
        self.m = service.m
        self.record = record
        self.config = config
        self.confirm = confirm
        self.human = human
        self.agent = Principal(f"agent:{record.id}", Role(record.role), human=False)
        self.provider: Provider | None = None
        self.bag: Toolbag | None = None
        self.pending: set[str] = set()  # executions waiting for approval
        self.task: asyncio.Task[RunRecord] | None = None  # set by the service driving it
        self.cancel_requested = False
        #: A delegated run: the personas of the runs above it (it uses only what all could).
        self.limits: tuple[Persona, ...] = ()
        self._confirm_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max(1, self.m.settings.max_concurrent_executions))
        self.rec = RunRecorder(
            record, service.runs, self.m.store, service.hub, messages=messages, seq=seq
        )

    @property
    def id(self) -> str:
        return self.record.id

    def requester(self) -> Principal:
        """Whoever started the run (a delegated run's, the human at the top)."""
        if self.human is not None:
            return self.human
        return Principal(self.record.requested_by, Role(self.record.role))

    @property
    def messages(self) -> list[Part]:
        """The transcript so far (typed parts, see :mod:`.transcript`)."""
        return self.rec.messages

    @property
    def listeners(self) -> list[Callable[[RunEvent], None]]:
        """Called with each event of the run as it is emitted."""
        return self.rec.listeners

    @property
    def timeline(self) -> Timeline:
        return self.rec.timeline

    # ---- driving ---------------------------------------------------------------------------
    def begin(self, text: str) -> None:
        """Add one user message: the run is ``running`` and its timeline open from now on."""
        if self.service.live.get(self.id) is not self:
            self.service.live[self.id] = self
        self.cancel_requested = False
        self.rec.begin(text)

    async def drive(self) -> RunRecord:
        """Run the loop after :meth:`begin` until a final answer (or an end)."""
        return await self._drive(self._loop)

    async def send(self, text: str) -> RunRecord:
        """Add one user message and run the loop until a final answer (or an end)."""
        self.begin(text)
        return await self.drive()

    async def resume(self) -> RunRecord:
        """After a restart: settle the calls of the last turn, then carry on."""
        self.rec.emit(Said("system", "resumed after a manager restart"))
        return await self._drive(self._resume)

    async def cancel(self, wait: float = 10.0) -> RunRecord:
        """Stop the run: its calls waiting for approval are withdrawn, it ends ``cancelled``.
        Waits up to ``wait`` seconds for it to have ended."""
        self.cancel_requested = True
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=wait)
        return self.record

    async def _drive(self, body: Callable[[Persona], Awaitable[None]]) -> RunRecord:
        try:
            persona = self.m.registry.persona(self.record.persona)
            self.provider = self.service.provider_factory(self.config)
            await body(persona)
        except ProviderError as exc:
            self.rec.finish(RunStatus.FAILED, error=ErrorInfo(exc.code, exc.message))
        except SkillError as exc:
            self.rec.finish(RunStatus.FAILED, error=ErrorInfo(exc.code, exc.message))
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        except Exception as exc:
            LOG.exception("agent run %s failed", self.id)
            error = ErrorInfo("internal_error", f"{type(exc).__name__}: {exc}")
            self.rec.finish(RunStatus.FAILED, error=error)
        finally:
            if self.provider is not None:
                with contextlib.suppress(Exception):
                    await self.provider.close()
                self.provider = None
        return self.record

    async def _cancelled(self) -> None:
        if self.record.status.final:
            return
        waiting = self.record.status is RunStatus.WAITING_APPROVAL
        # Why: a server shutting down keeps a waiting run as it is stored — status, transcript
        # with its ``pending`` notes, approval requests still open — so that the next start
        # resumes it and a decision taken meanwhile still reaches the model. Not a delegated
        # run: its parent, which waits on it, ends (interrupted) with this process.
        delegated = self.record.parent_run_id is not None
        if self.service.closing and self.service.resumable and waiting and not delegated:
            self.rec.detach()
            return
        # Otherwise nobody will see these requests end: withdraw them before ending the run.
        for execution_id in list(self.pending):
            with contextlib.suppress(Exception):
                await self.m.cancel(execution_id, self.agent)
        if self.cancel_requested:
            error = ErrorInfo("cancelled", "the run was cancelled")
            self.rec.finish(RunStatus.CANCELLED, error=error)
        else:
            reason = "the manager stopped while this run was going"
            self.rec.finish(RunStatus.INTERRUPTED, error=ErrorInfo("interrupted", reason))

    def _toolbag(self, persona: Persona) -> Toolbag:
        bag = self.bag
        if bag is None or bag.persona is not persona:
            mounted = bag.mounted if bag is not None else set()
            bag = Toolbag(
                self.m.registry,
                persona,
                self.rec.user_text(),
                threshold=self.m.settings.toolbag_deferral_threshold,
                mounted=mounted,
            )
            self.bag = bag
        bag.registry = self.m.registry  # a reload between turns is seen at the next turn
        bag.message = self.rec.user_text()
        return bag

    async def _loop(self, persona: Persona, step: Step | None = None) -> None:
        step = step or AskModel()
        while not isinstance(step, End):
            if isinstance(step, AskModel):
                step = await self._ask_model(persona)
            else:
                step = await self._run_calls(step, persona)
        self.rec.finish(step.status, final_answer=step.final_answer, error=step.error)

    async def _ask_model(self, persona: Persona) -> RunCalls | End:
        provider = self.provider
        assert provider is not None
        if self.record.turns >= persona.max_turns:
            last = next((m for m in reversed(self.messages) if isinstance(m, ModelReply)), None)
            reason = f"max_turns ({persona.max_turns}) reached before a final answer"
            text = (last.text or None) if last else None
            return End(RunStatus.MAX_TURNS, text, ErrorInfo("max_turns", reason))
        self.record.turns += 1
        self.rec.runs.update(self.record)
        bag = self._toolbag(persona)
        offered = [s for s in bag.tools() if role_permits(self.agent.role, s.skill_class)]
        notes = ranked_instructions(bag.registry, persona, bag.message)
        skills, catalogue = delegation.turn_tools(
            offered, persona, self.record, self.limits, bag.registry
        )
        system = system_prompt(
            persona, notes, bag.deferred, self.m.settings.prompt_listing_max_chars, catalogue
        )
        sent = [m for m in self.messages if m.kind in SENT_KINDS]
        tools = export_all(skills, provider.tool_format)
        turn = await provider.complete(system, sent, tools, self.rec.delta)
        self.rec.append(ModelReply.of(turn))
        calls = tuple(turn.tool_calls)
        self.rec.emit(Said("assistant", turn.text, self.record.turns, calls))
        if not turn.tool_calls:
            return End(RunStatus.DONE, turn.text)
        return RunCalls(turn, {s.name: s for s in skills})

    async def _run_calls(self, step: RunCalls, persona: Persona) -> AskModel:
        outcomes = await asyncio.gather(
            *(self._call(call, step.offered, persona) for call in step.turn.tool_calls),
            return_exceptions=True,  # every call settles before the run goes on (or fails)
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return AskModel()

    # ---- one tool call -----------------------------------------------------------------------
    async def _call(self, call: ToolCall, offered: dict[str, Skill], persona: Persona) -> None:
        started = time.monotonic()
        args, problem = call.parsed()
        self.rec.emit(ToolStarted(call.id, call.name, args if problem is None else call.arguments))
        skill = offered.get(call.name)
        kernel = skill is None or skill.source == delegation.KERNEL_SOURCE
        if call.name == delegation.DELEGATE_TOOL and kernel and problem is None:
            await delegation.delegate(self, call, args, persona)
            return
        if skill is None:
            hint = f"; use {SEARCH_TOOL} to find tools" if self.bag and self.bag.deferred else ""
            message = f"the tool {call.name!r} is not offered to you this turn{hint}"
            self.rec.refused(call, started, self.agent.name, "not_offered", message)
            return
        if problem is not None or not isinstance(args, dict):
            message = problem or "the arguments must be a JSON object"
            self.rec.refused(call, started, self.agent.name, "invalid_args", message)
            return
        async with self._slots:
            principal, confirm = self.agent, False
            # The gate says whether one yes at the terminal is exactly what this call needs
            # (never for dangerous skills or args the manager would refuse anyway).
            if (
                self.confirm is not None
                and self.human is not None
                and one_confirmation_suffices(skill, persona, self.human, args)
            ):
                async with self._confirm_lock:  # one question at a time at the terminal
                    yes = await self.confirm(skill, args)
                if not yes:
                    message = f"the operator declined to run {skill.name} at the terminal"
                    self.rec.refused(call, started, self.agent.name, "rejected", message)
                    return
                principal, confirm = self.human, True
            try:
                execution = await self.m.submit(
                    skill.name,
                    args,
                    principal=principal,
                    persona=persona.name,
                    confirm=confirm,
                    wait=True,
                    on_event=self._forwarder(call),
                )
            except SkillError as exc:
                error = exc.to_dict()
                envelope = error_envelope(error["code"], error["message"], error.get("details"))
                self.rec.result(call, started, envelope, error["code"], None)
                return
        await self._settle(call, started, execution)

    def _forwarder(self, call: ToolCall) -> Callable[[Event], None]:
        def forward(event: Event) -> None:
            if event.type in TOOL_OUTPUT_KINDS:
                kind = cast(ToolOutputKind, event.type)
                self.rec.emit(ToolOutput(kind, call.id, call.name, dict(event.data)))

        return forward

    async def _settle(self, call: ToolCall, started: float, execution: Execution) -> None:
        """Wait for a call waiting for approval, then hand its outcome to the transcript."""
        if execution.status is Status.PENDING_APPROVAL:
            # Why the check: a resumed run settles the same execution again, and its note is
            # already in the transcript; one note per execution keeps resuming repeatable.
            if not self.rec.noted_pending(execution.id):
                self.rec.note_pending(call, execution, self._signatures_required(execution))
            self.pending.add(execution.id)
            self.rec.set_status(RunStatus.WAITING_APPROVAL)
            # Cancelled while waiting (shutdown, Ctrl-C): ``pending`` keeps the id, so that
            # _cancelled() either keeps the run waiting (resumable) or withdraws the request.
            forward = self._forwarder(call)
            execution = await wait_final(self.m, execution.id, forward, self.service.poll_seconds)
            self.pending.discard(execution.id)
            # Why: the calls of one turn wait side by side; the run is running again only
            # when the last of them is decided (and never after it has ended).
            if not self.pending and not self.record.status.final:
                self.rec.set_status(RunStatus.RUNNING)
        self.rec.result(call, started, execution.envelope(), execution.status.value, execution.id)
        if call.name == SEARCH_TOOL and execution.ok:
            self._mount(execution.result)

    def _signatures_required(self, execution: Execution) -> int | None:
        if not execution.approval_id:
            return None
        with contextlib.suppress(SkillError):
            return self.m.desk.get(execution.approval_id).signatures_required
        return None

    def _mount(self, result: Any) -> None:
        if self.bag is None or not isinstance(result, dict):
            return
        found = result.get("results")
        if isinstance(found, list):
            names = [r.get("name") for r in found if isinstance(r, dict)]
            self.bag.mount(n for n in names if isinstance(n, str))

    # ---- resuming ----------------------------------------------------------------------------
    async def _resume(self, persona: Persona) -> None:
        self._toolbag(persona)
        for part in self.messages:  # what earlier searches mounted
            if isinstance(part, ToolResult) and part.name == SEARCH_TOOL:
                with contextlib.suppress(ValueError, TypeError):
                    self._mount(json.loads(part.content))
        replies = [i for i, m in enumerate(self.messages) if isinstance(m, ModelReply)]
        if replies:
            reply = self.messages[replies[-1]]
            assert isinstance(reply, ModelReply)
            later = self.messages[replies[-1] + 1 :]
            answered = {m.tool_call_id for m in later if isinstance(m, ToolResult)}
            pending = {m.tool_call_id: m.execution_id for m in later if isinstance(m, ApprovalWait)}
            waits = []
            for call in reply.tool_calls:
                if call.id in answered:
                    continue
                # Why: an unanswered call with a ``pending`` note waits for its request again;
                # one without was running when the manager stopped (its execution was marked
                # interrupted at start-up), so the model is told so instead.
                found = self.m.store.executions.get(pending.get(call.id, ""))
                if found is None:
                    reason = "the manager stopped while this call ran"
                    envelope = error_envelope("interrupted", reason)
                    self.rec.result(call, time.monotonic(), envelope, "interrupted", None)
                    continue
                waits.append(self._settle(call, time.monotonic(), found))
            await asyncio.gather(*waits)
        await self._loop(persona)
