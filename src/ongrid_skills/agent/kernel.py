"""The agent kernel: the service that starts, follows, cancels, resumes and closes the runs of a
manager.

:class:`AgentService` is what every door uses (the REST routes ``/v1/agent/runs``, the terminal's
``chat``, the web console), through a door-neutral API: :meth:`~AgentService.start` a run,
:meth:`~AgentService.send` it another message, :meth:`~AgentService.cancel` it (the gate's rule),
:meth:`~AgentService.follow` its typed events (:mod:`.events`: replayed, then live, text deltas
included; from the store while another process drives it). The served app opens one service
beside its manager (:func:`open_agents`, in the shared lifespan) and hangs it on
``app.state.agents``. At start-up the service ends the runs a dead manager left going and resumes
those that were waiting for an approval. It must never import a door, and never drives a turn
itself: the loop does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ongrid_skills.agent.events import RunEvent, from_event
from ongrid_skills.agent.loop import AgentRun, Confirm
from ongrid_skills.agent.providers import ProviderConfig, ProviderFactory, make_provider
from ongrid_skills.agent.record import mark_interrupted
from ongrid_skills.agent.reviewer import Reviewer
from ongrid_skills.agent.runs import RunRecord, RunStatus, RunStore
from ongrid_skills.errors import Conflict, Forbidden, InvalidRequest, NotFound
from ongrid_skills.execution.timeline import EventHub, Timeline
from ongrid_skills.governance.gate import may_cancel
from ongrid_skills.governance.principal import Principal
from ongrid_skills.manager import Manager
from ongrid_skills.skills.persona import Persona

#: How many more looks a follower of a run driven elsewhere gives a final row for its ``done``.
FINAL_LOOKS = 20


@asynccontextmanager
async def open_agents(manager: Manager) -> AsyncIterator[AgentService]:
    """The agent service of a served manager, for the app's lifespan: runs waiting for an
    approval resume (now, and when the next start finds them), and stop before the manager;
    the reviewer, when one is configured, reads the requests this manager creates."""
    service = AgentService(manager, resumable=True)
    reviewer = Reviewer.of(manager, service.provider_factory)  # ONGRID_REVIEWER_PERSONA
    if reviewer is not None:
        reviewer.start()
    await service.recover()
    try:
        yield service
    finally:
        if reviewer is not None:
            await reviewer.close()
        await service.close()


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
        #: How often a run waiting for an approval looks at its request again.
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
        parent: AgentRun | None = None,
        call_id: str | None = None,
    ) -> AgentRun:
        """Record a new run (status running, no message yet). Raises for an unknown persona.

        ``parent`` and ``call_id``: a delegated run, started by that run's ``delegate`` call
        (:mod:`.delegation`), one level deeper, for the same requester and role."""
        who = self.m.registry.persona(persona)
        config = ProviderConfig.from_settings(self.settings, self.model_for(who, model))
        record = RunRecord(
            persona=who.name,
            requested_by=requester.name,
            role=requester.role.value,
            provider=config.provider,
            model=config.model,
            replica_id=self.m.replica_id,
        )
        details: dict[str, Any] = {
            "persona": who.name,
            "provider": config.provider,
            "model": config.model,
        }
        if parent is not None:
            record.role = parent.record.role
            record.parent_run_id, record.parent_call_id = parent.id, call_id
            record.depth = parent.record.depth + 1
            details.update(parent_run_id=parent.id, depth=record.depth)
        self.runs.insert(record)
        with self.m.store.tx() as conn:
            self.m.store.audit.append(conn, requester.name, "agent.run_started", record.id, details)
        run = AgentRun(self, record, config, confirm=confirm, human=requester)
        self.live[record.id] = run
        return run

    def start(
        self,
        persona: str,
        requester: Principal,
        message: str,
        *,
        model: str | None = None,
        confirm: Confirm | None = None,
    ) -> AgentRun:
        """A new run driven with its first message in the background. Its events can be
        followed from now on (:meth:`follow`); raises for an unknown persona or no model."""
        run = self.create(persona, requester, model=model, confirm=confirm)
        self.drive(run, message)
        return run

    def send(
        self, run_id: str, message: str, principal: Principal, *, confirm: Confirm | None = None
    ) -> AgentRun:
        """Continue a run that has ended with another message, as the same conversation.

        Only its requester may (the run's calls carry the requester's role); a run still going
        is a Conflict, and so is one driven by another replica (Conflict).
        """
        record = self.get(run_id)
        if principal.name != record.requested_by:
            raise Forbidden("only the requester may continue this run")
        if not record.status.final:
            raise Conflict(f"agent run {run_id} is {record.status.value}: wait for its end")
        if record.parent_run_id is not None:
            raise Conflict(
                f"agent run {run_id} was delegated by run {record.parent_run_id}: continue that "
                "conversation instead"
            )
        run = self.live.get(run_id) or self.restore(record)
        run.confirm, run.human = confirm, principal
        # On a shared database the run is this replica's from now on (written by begin()), so
        # that no other replica takes it for an orphan of the one that drove it before.
        run.record.replica_id = self.m.replica_id
        self.drive(run, message)
        return run

    def drive(self, run: AgentRun, message: str) -> asyncio.Task[RunRecord]:
        """Drive the run with one user message in the background. The message is recorded at
        once, so a follower that starts now sees this stretch of the run from its beginning."""
        run.begin(message)
        return self._track(run, asyncio.get_running_loop().create_task(run.drive()))

    async def cancel(self, run_id: str, principal: Principal) -> RunRecord:
        """Stop a run that is going here (its calls waiting for approval are withdrawn): the
        requester or an operator (the gate's ``may_cancel``). Forbidden, NotFound, or Conflict
        when the run is over or going in another process."""
        record = self.get(run_id)
        if not may_cancel(principal, record.requested_by):
            raise Forbidden("only the requester or an operator may cancel this run")
        if record.status.final:
            raise Conflict(f"agent run {run_id} is {record.status.value}")
        run = self.live.get(run_id)
        if run is None or run.task is None or run.task.done():
            raise Conflict(f"agent run {run_id} is not going in this server")
        return await run.cancel()

    async def finished(self, run_id: str) -> RunRecord:
        """The run once its current stretch has ended (a caller that goes away does not stop it)."""
        run = self.live.get(run_id)
        if run is not None and run.task is not None:
            await asyncio.wait({run.task})  # never cancels the run's task
        return self.get(run_id)

    def _track(self, run: AgentRun, task: asyncio.Task[RunRecord]) -> asyncio.Task[RunRecord]:
        self.tasks[run.id] = task
        run.task = task

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
        body["children"] = [child.to_dict() for child in self.runs.children(run_id)]
        return body

    def timeline(self, run_id: str) -> Timeline | None:
        """The live timeline of a run driven here, or None (then its events are in the store)."""
        return self.hub.get(run_id)

    async def follow(self, run_id: str, after: int = 0) -> AsyncIterator[tuple[int, RunEvent]]:
        """The run's numbered typed events after number ``after``: those so far, then live ones
        until its current stretch ends (``done``). Every door reads this one stream.

        Driven here: its live timeline. Driven by another process (a replica, a ``chat`` on the
        same data dir): the stored events, read again every ``poll_seconds`` until its row is
        final and its ``done`` is stored (the row is written final just before ``done``, so a
        few more looks are allowed for it); a run that starts being driven here meanwhile is
        followed on from its live timeline, whose numbering is the store's. Over: the stored
        events. A door checks the run exists (:meth:`get`) before it starts streaming."""
        position, last, grace = after, "", FINAL_LOOKS
        while True:
            timeline = self.hub.get(run_id)
            if timeline is not None:
                async for seq, event in timeline.follow(position):
                    yield seq, from_event(event)
                return
            record = self.runs.get(run_id)
            for seq, event in self.runs.events(run_id, position):
                position, last = seq, event.type
                yield seq, from_event(event)
            if record is None or (record.status.final and (last == "done" or grace <= 0)):
                return
            if record.status.final:
                grace -= 1
            await asyncio.sleep(self.poll_seconds)

    # ---- start-up and shutdown -----------------------------------------------------------
    async def recover(self) -> None:
        """Runs left ``running`` by a dead manager become ``interrupted``; runs waiting for an
        approval resume: they wait for their requests again and carry on when decided.
        Only the manager that owns the data dir recovers (see Manager.claim_data_dir). On a
        shared database only the runs no live replica drives, now and after every sweep of
        expired leases (see :meth:`adopt`)."""
        if not self.m.owns_data_dir:
            return
        if self.m.replica is not None:
            self.adopt()
            self.m.replica.listeners.append(self.adopt)
            return
        for record in self.runs.with_status([RunStatus.RUNNING, RunStatus.WAITING_APPROVAL]):
            self._take_over(record)

    def adopt(self) -> None:
        """Shared database: take over the runs whose replica died, each on exactly one replica
        (the conditional update of :meth:`RunStore.adopt`): ended if it was running (its turn
        died with its replica), resumed if it was waiting for an approval."""
        replica = self.m.replica
        if replica is None or self.closing:
            return
        for record in self.runs.orphans([RunStatus.RUNNING, RunStatus.WAITING_APPROVAL]):
            if self.runs.adopt(record, replica.id):
                self._take_over(record)

    def _take_over(self, record: RunRecord) -> None:
        # A delegated run is not resumed: the parent that waited on it ended with its process.
        if record.status is RunStatus.RUNNING or record.parent_run_id is not None:
            mark_interrupted(self.runs, self.m.store, record)
            return
        run = self.restore(record)
        self._track(run, asyncio.get_running_loop().create_task(run.resume()))

    def restore(self, record: RunRecord) -> AgentRun:
        """A stored run brought back to life with its transcript (to be resumed)."""
        stored = self.runs.messages(record.id)
        # The provider configured now (its URL and key may have changed), with the run's model.
        config = ProviderConfig.from_settings(self.settings, record.model)
        record.provider = config.provider
        run = AgentRun(
            self,
            record,
            config,
            messages=[m.part for m in stored],
            seq=stored[-1].seq if stored else 0,
        )
        self.live[record.id] = run
        return run

    async def close(self) -> None:
        """Cancel the runs going here and wait for them (waiting runs of a resumable service
        stay waiting, see AgentRun)."""
        self.closing = True
        if self.m.replica is not None and self.adopt in self.m.replica.listeners:
            self.m.replica.listeners.remove(self.adopt)
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
