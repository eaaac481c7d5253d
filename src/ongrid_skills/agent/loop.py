"""The agent loop (SPEC §8): a model drives the skills of one persona, turn by turn.

Each turn: the system prompt (persona body + active instructions skills + ``critical_reminder``),
the transcript converted for the provider, and the tools of the turn (the persona's offered set
with deferral: above the threshold, the ``activation: always`` tools plus ``search_skills``; what
a search finds is mounted for the next turns). Every tool call goes through ``Manager.submit`` —
the one path of every door: gate, approvals, audit, events — as the principal
``agent:<run id>`` with the role of whoever started the run (the stricter of role and persona
applies). The calls of one turn run concurrently; their results go back to the model verbatim (or
as the error envelope). A call that needs approval pauses the run (``waiting_approval``) until
the request is decided; the model then sees the outcome. The loop ends when the model answers
without tool calls, or at the persona's ``max_turns``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ongrid_skills.agent.providers import (
    Provider,
    ProviderConfig,
    ProviderError,
    TextSink,
    make_provider,
)
from ongrid_skills.agent.runs import RunRecord, RunStatus, RunStore
from ongrid_skills.agent.transcript import Message, ToolCall, Turn, error_envelope
from ongrid_skills.errors import InvalidRequest, NotFound, SkillError
from ongrid_skills.execution.records import ErrorInfo, Event, Execution, Status
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.governance.gate import one_confirmation_suffices, role_permits
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.model import Skill
from ongrid_skills.skills.persona import DEFAULT_PERSONA, Persona
from ongrid_skills.toolspec import SEARCH_TOOL, Toolbag, export_all, instructions
from ongrid_skills.types import Role

LOG = logging.getLogger("ongrid_skills.agent")
FLUSH_SECONDS = 0.5
#: Events kept only in the timeline's batch until the next flush (the others are written at once).
BATCHED = frozenset({"stderr", "progress", "stderr_truncated"})
#: How much of a tool result a ``tool_end`` event carries (the transcript keeps all of it).
EVENT_CONTENT_LIMIT = 64 * 1024

#: The terminal's inline confirmation: (skill, args) → yes or no.
Confirm = Callable[[Skill, Any], Awaitable[bool]]
ProviderFactory = Callable[[ProviderConfig], Provider]


def system_prompt(persona: Persona, notes: list[Skill], deferred: bool) -> str:
    """Persona body + the active instructions skills + deferral hint + the critical reminder."""
    parts = [persona.prompt.strip() or DEFAULT_PERSONA.prompt.strip()]
    if notes:
        lines = [
            "Instructions skills you may follow (read one with read_skill before acting on it):"
        ]
        for skill in notes:
            when = f" When to use: {skill.when_to_use}" if skill.when_to_use else ""
            lines.append(f"- {skill.name}: {skill.description}{when}")
        parts.append("\n".join(lines))
    if deferred:
        parts.append(
            f"More tools exist than are listed: call {SEARCH_TOOL} to find one; the tools it "
            "finds become callable on your next turn."
        )
    if persona.critical_reminder:
        parts.append(f"CRITICAL REMINDER: {persona.critical_reminder.strip()}")
    return "\n\n".join(parts)


class AgentService:
    """The runs of one manager: create, drive, follow, recover after a restart."""

    def __init__(
        self,
        manager: Manager,
        *,
        provider_factory: ProviderFactory = make_provider,
        poll_seconds: float = 0.2,
        resumable: bool = False,
    ) -> None:
        self.m = manager
        self.settings = manager.settings
        self.runs = RunStore(manager.store)
        self.hub = EventHub()
        self.provider_factory = provider_factory
        self.poll_seconds = poll_seconds
        #: Server: a run waiting for approval when the manager stops is resumed at the next start.
        self.resumable = resumable
        self.live: dict[str, AgentRun] = {}
        self.tasks: dict[str, asyncio.Task[RunRecord]] = {}
        self.closing = False

    # ---- creating and running ------------------------------------------------------------
    def model_for(self, persona: Persona, model: str | None = None) -> str:
        """The request's model, else the persona's, else ``ONGRID_LLM_MODEL``."""
        chosen = model or persona.model or self.settings.llm_model
        if not chosen:
            raise InvalidRequest(
                "no model: set ONGRID_LLM_MODEL, the persona's model, or pass one with the run"
            )
        return chosen

    def create(
        self,
        persona: str,
        requester: Principal,
        *,
        model: str | None = None,
        confirm: Confirm | None = None,
    ) -> AgentRun:
        """Record a new run (status running, no message yet). Raises for an unknown persona."""
        who = self.m.registry.persona(persona)
        config = ProviderConfig.from_settings(self.settings, self.model_for(who, model))
        record = RunRecord(
            persona=who.name,
            requested_by=requester.name,
            role=requester.role.value,
            provider=config.provider,
            model=config.model,
        )
        self.runs.insert(record)
        with self.m.store.tx() as conn:
            self.m.store.audit.append(
                conn,
                requester.name,
                "agent.run_started",
                record.id,
                {"persona": who.name, "provider": config.provider, "model": config.model},
            )
        run = AgentRun(self, record, config, confirm=confirm, human=requester)
        self.live[record.id] = run
        return run

    def start(self, run: AgentRun, message: str) -> asyncio.Task[RunRecord]:
        """Drive the run with one user message in the background."""
        return self._track(run, asyncio.get_running_loop().create_task(run.send(message)))

    def _track(self, run: AgentRun, task: asyncio.Task[RunRecord]) -> asyncio.Task[RunRecord]:
        self.tasks[run.id] = task

        def done(_task: asyncio.Task[RunRecord]) -> None:
            self.tasks.pop(run.id, None)
            if run.record.status.final:
                self.live.pop(run.id, None)

        task.add_done_callback(done)
        return task

    # ---- queries -------------------------------------------------------------------------
    def get(self, run_id: str) -> RunRecord:
        record = self.runs.get(run_id)
        if record is None:
            raise NotFound(f"unknown agent run {run_id!r}")
        return record

    def body(self, run_id: str) -> dict[str, Any]:
        """The run and its transcript, as the API and ``chat --json`` show them."""
        body = self.get(run_id).to_dict()
        body["messages"] = [m.to_dict() for m in self.runs.messages(run_id)]
        return body

    def timeline(self, run_id: str) -> Timeline | None:
        return self.hub.get(run_id)

    # ---- start-up and shutdown -----------------------------------------------------------
    async def recover(self) -> None:
        """Runs left ``running`` by a dead manager become ``interrupted``; runs waiting for an
        approval resume: they wait for their requests again and carry on when decided.
        Only the manager that owns the data dir recovers (see Manager.claim_data_dir)."""
        if not self.m.owns_data_dir:
            return
        for record in self.runs.with_status([RunStatus.RUNNING]):
            record.status = RunStatus.INTERRUPTED
            record.error = ErrorInfo("interrupted", "the manager stopped while this run was going")
            record.finished_at = time.time()
            self.runs.update(record)
            event = Event("done", _done_data(record))
            self.runs.add_events(record.id, [(self.runs.last_event_seq(record.id) + 1, event)])
            with self.m.store.tx() as conn:
                self.m.store.audit.append(
                    conn, "manager", "agent.run_interrupted", record.id, {"persona": record.persona}
                )
        for record in self.runs.with_status([RunStatus.WAITING_APPROVAL]):
            run = self.restore(record)
            self._track(run, asyncio.get_running_loop().create_task(run.resume()))

    def restore(self, record: RunRecord) -> AgentRun:
        stored = self.runs.messages(record.id)
        # The provider configured now (its URL and key may have changed), with the run's model.
        config = ProviderConfig.from_settings(self.settings, record.model)
        record.provider = config.provider
        run = AgentRun(
            self,
            record,
            config,
            messages=[Message(m.role, m.content) for m in stored],
            seq=stored[-1].seq if stored else 0,
        )
        self.live[record.id] = run
        return run

    async def close(self) -> None:
        self.closing = True
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


def _done_data(record: RunRecord) -> dict[str, Any]:
    return {
        "status": record.status.value,
        "final_answer": record.final_answer,
        "error": record.error.to_dict() if record.error else None,
        "turns": record.turns,
    }


class AgentRun:
    """One conversation: its transcript, its tools, its event timeline."""

    def __init__(
        self,
        service: AgentService,
        record: RunRecord,
        config: ProviderConfig,
        *,
        messages: list[Message] | None = None,
        seq: int = 0,
        confirm: Confirm | None = None,
        human: Principal | None = None,
    ) -> None:
        self.service = service
        self.m = service.m
        self.runs = service.runs
        self.record = record
        self.config = config
        self.messages: list[Message] = messages or []
        self.seq = seq
        self.confirm = confirm
        self.human = human
        self.agent = Principal(f"agent:{record.id}", Role(record.role), human=False)
        self.listeners: list[Callable[[Event], None]] = []
        self.on_text: TextSink | None = None
        self.provider: Provider | None = None
        self.bag: Toolbag | None = None
        self.pending: set[str] = set()  # executions waiting for approval
        self.cancel_requested = False
        self._flusher: asyncio.TimerHandle | None = None
        self._confirm_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max(1, self.m.settings.max_concurrent_executions))
        self.timeline = self._open_timeline()

    @property
    def id(self) -> str:
        return self.record.id

    # ---- events ----------------------------------------------------------------------------
    def _open_timeline(self) -> Timeline:
        timeline = self.service.hub.get(self.id)
        if timeline is None:
            timeline = self.service.hub.open(self.id)
            timeline.events.extend(self.runs.events(self.id))
            timeline.flushed = len(timeline.events)
        return timeline

    def emit(self, kind: str, data: dict[str, Any]) -> None:
        event = Event(kind, data)
        self.timeline.append(event)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                LOG.exception("an agent event listener failed")
        if kind in BATCHED:
            if self._flusher is None:
                self._flusher = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)
        else:
            self.flush()

    def flush(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        pending = self.timeline.unflushed()
        if pending:
            self.runs.add_events(self.id, pending)

    # ---- transcript ------------------------------------------------------------------------
    def _append(self, message: Message) -> None:
        self.seq += 1
        self.runs.add_message(self.id, self.seq, message.role, message.content)
        self.messages.append(message)

    def _user_text(self) -> str:
        return "\n".join(m.content["text"] for m in self.messages if m.role == "user")

    def _set_status(self, status: RunStatus) -> None:
        if self.record.status is not status:
            self.record.status = status
            self.runs.update(self.record)

    # ---- driving ---------------------------------------------------------------------------
    async def send(self, text: str) -> RunRecord:
        """Add one user message and run the loop until a final answer (or an end)."""
        if self.service.live.get(self.id) is not self:
            self.service.live[self.id] = self
        self.timeline = self._open_timeline()
        self.record.status = RunStatus.RUNNING
        self.record.turns = 0
        self.record.final_answer = None
        self.record.error = None
        self.record.finished_at = None
        self.runs.update(self.record)
        self._append(Message.user(text))
        self.emit("message", {"role": "user", "text": text})
        return await self._drive(self._loop)

    async def resume(self) -> RunRecord:
        """After a restart: settle the calls of the last turn, then carry on."""
        self.emit("message", {"role": "system", "text": "resumed after a manager restart"})
        return await self._drive(self._resume)

    async def _drive(self, body: Callable[[Persona], Awaitable[None]]) -> RunRecord:
        try:
            persona = self.m.registry.persona(self.record.persona)
            self.provider = self.service.provider_factory(self.config)
            await body(persona)
        except ProviderError as exc:
            self._end(RunStatus.FAILED, error=ErrorInfo(exc.code, exc.message))
        except SkillError as exc:
            self._end(RunStatus.FAILED, error=ErrorInfo(exc.code, exc.message))
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        except Exception as exc:
            LOG.exception("agent run %s failed", self.id)
            self._end(
                RunStatus.FAILED, error=ErrorInfo("internal_error", f"{type(exc).__name__}: {exc}")
            )
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
        if self.service.closing and self.service.resumable and waiting:
            self.flush()  # kept waiting: resumed at the next start
            self.service.hub.close(self.id)
            return
        for execution_id in list(self.pending):  # withdraw what nobody will see the end of
            with contextlib.suppress(Exception):
                await self.m.cancel(execution_id, self.agent)
        if self.cancel_requested:
            self._end(RunStatus.CANCELLED, error=ErrorInfo("cancelled", "the run was cancelled"))
        else:
            reason = "the manager stopped while this run was going"
            self._end(RunStatus.INTERRUPTED, error=ErrorInfo("interrupted", reason))

    def _end(
        self, status: RunStatus, *, final_answer: str | None = None, error: ErrorInfo | None = None
    ) -> None:
        self.record.status = status
        self.record.final_answer = final_answer
        self.record.error = error
        self.record.finished_at = time.time()
        self.runs.update(self.record)
        with self.m.store.tx() as conn:
            self.m.store.audit.append(
                conn,
                "manager",
                "agent.run_finished",
                self.id,
                {"status": status.value, "turns": self.record.turns, "error": error and error.code},
            )
        self.emit("done", _done_data(self.record))
        self.flush()
        self.service.hub.close(self.id)

    def _toolbag(self, persona: Persona) -> Toolbag:
        bag = self.bag
        if bag is None or bag.persona is not persona:
            mounted = bag.mounted if bag is not None else set()
            bag = Toolbag(
                self.m.registry,
                persona,
                self._user_text(),
                threshold=self.m.settings.toolbag_deferral_threshold,
                mounted=mounted,
            )
            self.bag = bag
        bag.registry = self.m.registry  # a reload between turns is seen at the next turn
        bag.message = self._user_text()
        return bag

    async def _loop(self, persona: Persona) -> None:
        provider = self.provider
        assert provider is not None
        while True:
            if self.record.turns >= persona.max_turns:
                last = next((m for m in reversed(self.messages) if m.role == "assistant"), None)
                text = (last.content.get("text") or None) if last else None
                reason = f"max_turns ({persona.max_turns}) reached before a final answer"
                self._end(
                    RunStatus.MAX_TURNS, final_answer=text, error=ErrorInfo("max_turns", reason)
                )
                return
            self.record.turns += 1
            self.runs.update(self.record)
            bag = self._toolbag(persona)
            skills = [s for s in bag.tools() if role_permits(self.agent.role, s.skill_class)]
            offered = {s.name: s for s in skills}
            notes = instructions(bag.registry, persona, bag.message)
            system = system_prompt(persona, notes, bag.deferred)
            sent = [m for m in self.messages if m.role in ("user", "assistant", "tool")]
            turn = await provider.complete(
                system, sent, export_all(skills, provider.tool_format), self.on_text
            )
            self._append(Message.assistant(turn))
            self.emit(
                "message",
                {
                    "role": "assistant",
                    "text": turn.text,
                    "turn": self.record.turns,
                    "tool_calls": [c.to_dict() for c in turn.tool_calls],
                },
            )
            if not turn.tool_calls:
                self._end(RunStatus.DONE, final_answer=turn.text)
                return
            await self._calls(turn, offered, persona)

    async def _calls(self, turn: Turn, offered: dict[str, Skill], persona: Persona) -> None:
        outcomes = await asyncio.gather(
            *(self._call(call, offered, persona) for call in turn.tool_calls),
            return_exceptions=True,  # every call settles before the run goes on (or fails)
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome

    # ---- one tool call -----------------------------------------------------------------------
    async def _call(self, call: ToolCall, offered: dict[str, Skill], persona: Persona) -> None:
        started = time.monotonic()
        base = {"call_id": call.id, "tool": call.name}
        args, problem = call.parsed()
        self.emit("tool_start", {**base, "args": args if problem is None else call.arguments})
        skill = offered.get(call.name)
        if skill is None:
            hint = f"; use {SEARCH_TOOL} to find tools" if self.bag and self.bag.deferred else ""
            message = f"the tool {call.name!r} is not offered to you this turn{hint}"
            self._refused(call, base, started, "not_offered", message)
            return
        if problem is not None or not isinstance(args, dict):
            message = problem or "the arguments must be a JSON object"
            self._refused(call, base, started, "invalid_args", message)
            return
        async with self._slots:
            principal, confirm = self.agent, False
            if (
                self.confirm is not None
                and self.human is not None
                and one_confirmation_suffices(skill, persona, self.human, args)
            ):
                async with self._confirm_lock:
                    yes = await self.confirm(skill, args)
                if not yes:
                    message = f"the operator declined to run {skill.name} at the terminal"
                    self._refused(call, base, started, "rejected", message)
                    return
                assert self.human is not None
                principal, confirm = self.human, True
            try:
                execution = await self.m.submit(
                    skill.name,
                    args,
                    principal=principal,
                    persona=persona.name,
                    confirm=confirm,
                    wait=True,
                    on_event=self._forwarder(base),
                )
            except SkillError as exc:
                error = exc.to_dict()
                envelope = error_envelope(error["code"], error["message"], error.get("details"))
                self._result(call, base, started, envelope, error["code"], None)
                return
        await self._settle(call, base, started, execution)

    def _forwarder(self, base: dict[str, Any]) -> Callable[[Event], None]:
        def forward(event: Event) -> None:
            if event.type in BATCHED:
                self.emit(event.type, {**base, **event.data})

        return forward

    async def _settle(
        self, call: ToolCall, base: dict[str, Any], started: float, execution: Execution
    ) -> None:
        """Wait for a call waiting for approval, then hand its outcome to the transcript."""
        if execution.status is Status.PENDING_APPROVAL:
            if not any(
                m.role == "pending" and m.content.get("execution_id") == execution.id
                for m in self.messages
            ):
                self._append(
                    Message(
                        "pending",
                        {
                            "tool_call_id": call.id,
                            "name": call.name,
                            "execution_id": execution.id,
                            "approval_id": execution.approval_id,
                        },
                    )
                )
                required = None
                if execution.approval_id:
                    with contextlib.suppress(SkillError):
                        required = self.m.desk.get(execution.approval_id).signatures_required
                self.emit(
                    "approval_pending",
                    {
                        **base,
                        "args": execution.args,
                        "execution_id": execution.id,
                        "approval_id": execution.approval_id,
                        "signatures_required": required,
                    },
                )
            self.pending.add(execution.id)
            self._set_status(RunStatus.WAITING_APPROVAL)
            # Cancelled while waiting (shutdown, Ctrl-C): ``pending`` keeps the id, so that
            # _cancelled() either keeps the run waiting (resumable) or withdraws the request.
            execution = await self._wait_final(execution.id, self._forwarder(base))
            self.pending.discard(execution.id)
            if not self.pending and not self.record.status.final:
                self._set_status(RunStatus.RUNNING)
        self._result(
            call, base, started, execution.envelope(), execution.status.value, execution.id
        )
        if call.name == SEARCH_TOOL and execution.ok:
            self._mount(execution.result)

    async def _wait_final(self, execution_id: str, forward: Callable[[Event], None]) -> Execution:
        """Until the execution ends: approved and run (here or by another process sharing the
        store), rejected, expired, cancelled. Live events are forwarded while it runs here."""
        seen = 0
        while True:
            execution = self.m.store.executions.get(execution_id)
            if execution is None:
                raise NotFound(f"execution {execution_id} disappeared from the store")
            if execution.status.final:  # what ran between two looks: from the store, in order
                for seq, event in self.m.store.executions.events(execution_id, after=seen):
                    seen = seq
                    forward(event)
                return execution
            if execution.status is Status.PENDING_APPROVAL and execution.approval_id:
                with contextlib.suppress(SkillError):
                    self.m.desk.get(execution.approval_id)  # expires a request past its TTL
            timeline = self.m.hub.get(execution_id)
            if timeline is not None and execution.status is Status.RUNNING:
                async for seq, event in timeline.follow(after=seen):
                    seen = seq
                    forward(event)
                continue
            await asyncio.sleep(self.service.poll_seconds)

    def _mount(self, result: Any) -> None:
        if self.bag is None or not isinstance(result, dict):
            return
        found = result.get("results")
        if isinstance(found, list):
            names = [r.get("name") for r in found if isinstance(r, dict)]
            self.bag.mount(n for n in names if isinstance(n, str))

    def _refused(
        self, call: ToolCall, base: dict[str, Any], started: float, code: str, message: str
    ) -> None:
        """A call refused before reaching the manager: recorded in the transcript and audit."""
        with self.m.store.tx() as conn:
            self.m.store.audit.append(
                conn,
                self.agent.name,
                "agent.tool_refused",
                self.id,
                {"skill": call.name[:200], "code": code, "reason": message},
            )
        self._result(call, base, started, error_envelope(code, message), code, None)

    def _result(
        self,
        call: ToolCall,
        base: dict[str, Any],
        started: float,
        content: str,
        status: str,
        execution_id: str | None,
    ) -> None:
        self._append(
            Message(
                "tool",
                {
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": content,
                    "status": status,
                    "execution_id": execution_id,
                    "is_error": status != Status.SUCCEEDED.value,
                },
            )
        )
        data: dict[str, Any] = {
            **base,
            "status": status,
            "execution_id": execution_id,
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
            "content": content[:EVENT_CONTENT_LIMIT],
        }
        if len(content) > EVENT_CONTENT_LIMIT:
            data["content_truncated"] = True
        self.emit("tool_end", data)

    # ---- resuming ----------------------------------------------------------------------------
    async def _resume(self, persona: Persona) -> None:
        self._toolbag(persona)
        for message in self.messages:  # what earlier searches mounted
            if message.role == "tool" and message.content.get("name") == SEARCH_TOOL:
                with contextlib.suppress(ValueError, TypeError):
                    self._mount(json.loads(message.content["content"]))
        last = max((i for i, m in enumerate(self.messages) if m.role == "assistant"), default=None)
        if last is not None:
            later = self.messages[last + 1 :]
            answered = {m.content["tool_call_id"] for m in later if m.role == "tool"}
            pending = {
                m.content["tool_call_id"]: m.content["execution_id"]
                for m in later
                if m.role == "pending"
            }
            waits = []
            for call in self.messages[last].calls():
                if call.id in answered:
                    continue
                base = {"call_id": call.id, "tool": call.name}
                found = self.m.store.executions.get(pending.get(call.id, ""))
                if found is None:
                    reason = "the manager stopped while this call ran"
                    self._result(
                        call,
                        base,
                        time.monotonic(),
                        error_envelope("interrupted", reason),
                        "interrupted",
                        None,
                    )
                    continue
                waits.append(self._settle(call, base, time.monotonic(), found))
            await asyncio.gather(*waits)
        await self._loop(persona)
