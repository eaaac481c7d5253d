"""The recording half of an agent run: what happened, written down as it happens.

:class:`RunRecorder` appends the run's transcript entries (memory and store, numbered), keeps its
row's status, emits its timeline events (live listeners, the event hub, the store — noisy kinds
in batches), writes its audit lines, and settles each tool call's outcome into the transcript as
the ``tool`` message the model reads next turn. It decides nothing: the loop (:mod:`.loop`)
chooses what to record; this module must never call a model, submit a skill or ask the gate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ongrid_skills.agent.events import (
    TOOL_OUTPUT_KINDS,
    ApprovalPending,
    RunDone,
    RunEvent,
    Said,
    TextDelta,
    ToolEnded,
    inner_kind,
    to_event,
)
from ongrid_skills.agent.runs import RunRecord, RunStatus, RunStore
from ongrid_skills.agent.transcript import (
    ApprovalWait,
    Part,
    ToolCall,
    ToolResult,
    UserText,
    error_envelope,
)
from ongrid_skills.execution.records import ErrorInfo, Execution, Status
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.store import Store

LOG = logging.getLogger("ongrid_skills.agent")
FLUSH_SECONDS = 0.5
#: Events kept only in the timeline's batch until the next flush (the others are written at once).
BATCHED = frozenset({*TOOL_OUTPUT_KINDS, "text_delta"})
#: How much of a tool result a ``tool_end`` event carries (the transcript keeps all of it).
EVENT_CONTENT_LIMIT = 64 * 1024


def done_event(record: RunRecord) -> RunDone:
    """A run's last event, ``done``."""
    return RunDone(
        record.status.value,
        record.final_answer,
        record.error.to_dict() if record.error else None,
        record.turns,
    )


def mark_interrupted(runs: RunStore, store: Store, record: RunRecord) -> None:
    """End a stored run nobody drives any more (its manager died): status, ``done``, audit."""
    record.status = RunStatus.INTERRUPTED
    record.error = ErrorInfo("interrupted", "the manager stopped while this run was going")
    record.finished_at = time.time()
    runs.update(record)
    event = to_event(done_event(record))
    runs.add_events(record.id, [(runs.last_event_seq(record.id) + 1, event)])
    with store.tx() as conn:
        store.audit.append(
            conn, "manager", "agent.run_interrupted", record.id, {"persona": record.persona}
        )


class RunRecorder:
    """Writes one run as it goes: its transcript, its status, its events and its audit lines."""

    def __init__(
        self,
        record: RunRecord,
        runs: RunStore,
        store: Store,
        hub: EventHub,
        *,
        messages: list[Part] | None = None,
        seq: int = 0,
    ) -> None:
        self.record = record
        self.runs = runs
        self.store = store
        self.hub = hub
        self.messages: list[Part] = messages or []
        self.seq = seq  # the number of the last stored transcript entry
        self.listeners: list[Callable[[RunEvent], None]] = []
        self._flusher: asyncio.TimerHandle | None = None
        self.timeline = self.open_timeline()

    @property
    def id(self) -> str:
        return self.record.id

    # ---- events ----------------------------------------------------------------------------
    def open_timeline(self) -> Timeline:
        """The run's live timeline, reopened from the stored events when the hub has none."""
        timeline = self.hub.get(self.id)
        if timeline is None:
            timeline = self.hub.open(self.id)
            timeline.events.extend(self.runs.events(self.id))
            timeline.flushed = len(timeline.events)
        self.timeline = timeline
        return timeline

    def emit(self, event: RunEvent) -> None:
        """One event: to the timeline and the listeners now, to the store now or at the flush."""
        self.timeline.append(to_event(event))
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                LOG.exception("an agent event listener failed")
        if inner_kind(event) in BATCHED:
            if self._flusher is None:
                self._flusher = asyncio.get_running_loop().call_later(FLUSH_SECONDS, self.flush)
        else:
            self.flush()

    def flush(self) -> None:
        """Store the events not stored yet."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        with self.timeline.flushing() as pending:
            if pending:
                self.runs.add_events(self.id, pending)

    def delta(self, text: str) -> None:
        """A piece of the model's answer as it streams (a provider's ``on_text``)."""
        if text:
            self.emit(TextDelta(text))

    def detach(self) -> None:
        """Stop following the run live, leaving it as stored (to be resumed at the next start)."""
        self.flush()
        self.hub.close(self.id)

    # ---- transcript and status -------------------------------------------------------------
    def append(self, part: Part) -> None:
        """One transcript entry, stored with the next number."""
        self.seq += 1
        self.runs.add_message(self.id, self.seq, part)
        self.messages.append(part)

    def user_text(self) -> str:
        """Everything the user said in this run (what the toolbag ranks tools against)."""
        return "\n".join(m.text for m in self.messages if isinstance(m, UserText))

    def set_status(self, status: RunStatus) -> None:
        if self.record.status is not status:
            self.record.status = status
            self.runs.update(self.record)

    def begin(self, text: str) -> None:
        """A new user message: the run goes again from turn 0, with the transcript so far."""
        self.open_timeline()
        self.record.status = RunStatus.RUNNING
        self.record.turns = 0
        self.record.final_answer = None
        self.record.error = None
        self.record.finished_at = None
        self.runs.update(self.record)
        self.append(UserText(text))
        self.emit(Said("user", text))

    def finish(
        self, status: RunStatus, *, final_answer: str | None = None, error: ErrorInfo | None = None
    ) -> None:
        """The end of the run: its row, an audit line, the ``done`` event, the timeline closed."""
        self.record.status = status
        self.record.final_answer = final_answer
        self.record.error = error
        self.record.finished_at = time.time()
        self.runs.update(self.record)
        with self.store.tx() as conn:
            self.store.audit.append(
                conn,
                "manager",
                "agent.run_finished",
                self.id,
                {"status": status.value, "turns": self.record.turns, "error": error and error.code},
            )
        self.emit(done_event(self.record))
        self.flush()
        self.hub.close(self.id)

    # ---- tool calls ------------------------------------------------------------------------
    def noted_pending(self, execution_id: str) -> bool:
        """Whether the transcript already holds the ``pending`` note of this execution."""
        return any(
            isinstance(m, ApprovalWait) and m.execution_id == execution_id for m in self.messages
        )

    def note_pending(
        self,
        call: ToolCall,
        execution: Execution,
        signatures_required: int | None,
    ) -> None:
        """A call that waits for approval: the ``pending`` note and the ``approval_pending`` event.

        The note is written before the run waits, so that a manager restarted meanwhile finds
        which execution each unanswered call of the last turn is waiting on (see AgentRun.resume).
        """
        self.append(ApprovalWait(call.id, call.name, execution.id, execution.approval_id))
        self.emit(
            ApprovalPending(
                call.id,
                call.name,
                execution.args,
                execution.id,
                execution.approval_id,
                signatures_required,
            )
        )

    def refused(
        self,
        call: ToolCall,
        started: float,
        actor: str,
        code: str,
        message: str,
    ) -> None:
        """A call refused before reaching the manager: recorded in the transcript and audit."""
        with self.store.tx() as conn:
            self.store.audit.append(
                conn,
                actor,
                "agent.tool_refused",
                self.id,
                {"skill": call.name[:200], "code": code, "reason": message},
            )
        self.result(call, started, error_envelope(code, message), code, None)

    def result(
        self,
        call: ToolCall,
        started: float,
        content: str,
        status: str,
        execution_id: str | None,
    ) -> None:
        """A call's outcome: the ``tool`` message the model reads, and the ``tool_end`` event."""
        failed = status != Status.SUCCEEDED.value
        self.append(ToolResult(call.id, call.name, content, status, execution_id, failed))
        self.emit(
            ToolEnded(
                call.id,
                call.name,
                status,
                execution_id,
                round((time.monotonic() - started) * 1000, 3),
                content[:EVENT_CONTENT_LIMIT],
                len(content) > EVENT_CONTENT_LIMIT,
            )
        )
