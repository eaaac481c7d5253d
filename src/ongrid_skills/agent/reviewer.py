"""The reviewer (SPEC §19): a persona that reads each new mutating or dangerous approval request
and attaches its written opinion, ending in ``Decision: approve`` or ``Decision: reject``.

:class:`Reviewer` is one of the desk's listeners. On ``requested`` it schedules a review and
returns at once: nothing waits on it, and a human may sign before it answers. A review is one
model call, offered no tools (the reviewer judges, it never acts), bounded by
``ONGRID_REVIEWER_TIMEOUT``; what it reads is the skill's definition (description, class, input
schema), the frozen args (secret-looking values masked), the asking agent run's last messages
(already masked where a credential's value showed) and the request's preview (SPEC §20,
:func:`preview_section`; a request whose preview runs is reviewed once it has ended, on
``previewed``, so that the reviewer reads what the call would do). The opinion is masked like
any text that may carry a secret (:func:`~ongrid_skills.builtins.redact.redact`) and cut to
:data:`OPINION_CHARS`.

What the opinion does is the desk's (:mod:`ongrid_skills.approvals.opinions`): advice, or, with
``ONGRID_REVIEWER_CONFIRMS_MUTATING``, the one confirmation of a mutating call; never a signature
of a dangerous one. A reviewer that errors, times out or answers without a decision leaves a
note ("reviewer failed: …") and changes nothing.

Replicas: a request is reviewed by the manager that created it (only that one hears its
``requested``), and the review is claimed in the database first (``review_status``), so a
request is never reviewed twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading

from ongrid_skills.agent.providers import ProviderConfig, ProviderFactory
from ongrid_skills.agent.runs import RunStore, StoredMessage
from ongrid_skills.agent.transcript import UserText
from ongrid_skills.approvals.opinions import REVIEWED
from ongrid_skills.approvals.previews import preview_text
from ongrid_skills.builtins.redact import mask_secrets, redact
from ongrid_skills.errors import SkillError
from ongrid_skills.manager import Manager
from ongrid_skills.notify.events import ApprovalEvent
from ongrid_skills.store.approvals import Approval

LOG = logging.getLogger("ongrid_skills.agent")

#: At most this many characters of an opinion are kept (the card, the API, the audit).
OPINION_CHARS = 4000
#: How many of the asking run's last transcript entries the reviewer reads, and how much of each.
LAST_MESSAGES = 8
MESSAGE_CHARS = 1500
#: How much of the frozen args and of the input schema it reads.
ARGS_CHARS = 6000
SCHEMA_CHARS = 4000
PREVIEW_CHARS = 6000
#: The prefix of an agent run's principal (``agent:<run id>``).
AGENT_PREFIX = "agent:"
#: The last line of an opinion: its decision (bold or code marks around it are ignored).
DECISION = re.compile(r"decision\s*:\s*(approve|reject)\.?", re.IGNORECASE)

#: The note of a review its manager stopped before the reviewer answered.
STOPPED = "reviewer failed: the manager stopped before the reviewer answered"

RULES = """\
You review one approval request of an operations tool before humans sign it. You cannot run
anything and you are offered no tools: read the request and give your opinion. Say what the
call would do, what could go wrong, and whether the arguments match what the asking agent was
told to do. Be brief (a few sentences). End your answer with exactly one last line,
`Decision: approve` or `Decision: reject`."""


def decision_of(text: str) -> str | None:
    """``approve`` or ``reject`` when the opinion's last non-empty line says so, else None."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    last = lines[-1].strip().strip("*_`> ").strip()
    found = DECISION.fullmatch(last)
    return found.group(1).lower() if found else None


def bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview_section(approval: Approval) -> str | None:
    """What the request's preview says would happen (SPEC §20), when it has one: its result
    (masked by the runner, and again here), or why it failed."""
    run = (approval.preview or {}).get("run")
    if not isinstance(run, dict):
        return None
    return bounded(redact(preview_text(run)), PREVIEW_CHARS)


def _previewing(approval: Approval) -> bool:
    run = (approval.preview or {}).get("run")
    return isinstance(run, dict) and run.get("status") == "running"


def transcript_line(message: StoredMessage) -> str:
    """One entry of the asking run, as the reviewer reads it."""
    content = message.content
    if message.role == "assistant":
        calls = [
            f"calls {call.get('name')}({call.get('arguments', '')})"
            for call in content.get("tool_calls", [])
        ]
        text = "\n".join(p for p in [content.get("text") or "", *calls] if p)
    elif message.role == "tool":
        text = f"{content.get('name')} → {content.get('status')}: {content.get('content', '')}"
    else:
        text = str(content.get("text", ""))
    return f"[{message.role}] {bounded(redact(text), MESSAGE_CHARS)}"


class Reviewer:
    """Reviews each new mutating or dangerous request of one manager, in the background."""

    def __init__(
        self,
        manager: Manager,
        provider_factory: ProviderFactory,
        *,
        persona: str,
        timeout: float,
        counts: bool,
    ) -> None:
        self.m = manager
        self.provider_factory = provider_factory
        self.persona = persona
        self.timeout = timeout
        #: ``ONGRID_REVIEWER_CONFIRMS_MUTATING``: an approving opinion confirms a mutating call.
        self.counts = counts
        self.tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0
        self._closed = False

    @classmethod
    def of(cls, manager: Manager, provider_factory: ProviderFactory) -> Reviewer | None:
        """The reviewer the settings name (``ONGRID_REVIEWER_PERSONA``), or None."""
        settings = manager.settings
        if not settings.reviewer_persona:
            return None
        return cls(
            manager,
            provider_factory,
            persona=settings.reviewer_persona,
            timeout=float(settings.reviewer_timeout),
            counts=settings.reviewer_confirms_mutating,
        )

    # ---- listening -----------------------------------------------------------------------
    def start(self) -> None:
        """Listen to the desk (on the running event loop)."""
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self.m.desk.listeners.append(self.hear)
        if self.m.replica is None and self.m.owns_data_dir:
            # Reviews a previous run of this manager claimed and never finished: say so.
            self.m.desk.opinions.abandoned(STOPPED)

    def hear(self, event: ApprovalEvent) -> None:
        """The desk's listener: a new mutating or dangerous request is reviewed, later; one
        whose preview runs, once the preview has ended."""
        if self._closed or self._loop is None or event.kind not in ("requested", "previewed"):
            return
        if event.approval.skill_class not in REVIEWED:
            return
        if event.kind == "requested" and _previewing(event.approval):
            return  # its preview runs: reviewed when it has ended (``previewed``)
        if threading.get_ident() != self._thread:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._schedule, event.approval.id)
            return
        self._schedule(event.approval.id)

    def _schedule(self, approval_id: str) -> None:
        if self._closed:
            return
        task = asyncio.get_running_loop().create_task(self.review(approval_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def close(self) -> None:
        """Stop listening and end the reviews under way (their requests stay as they are)."""
        self._closed = True
        with contextlib.suppress(ValueError):
            self.m.desk.listeners.remove(self.hear)
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    # ---- one review ----------------------------------------------------------------------
    async def review(self, approval_id: str) -> None:
        """Claim the request, ask the reviewer persona, attach what it said (or why not)."""
        opinions = self.m.desk.opinions
        # On the event loop, like every decision of the desk (its feed is an event-loop object).
        approval = opinions.claim(approval_id, self.persona)
        if approval is None or approval.review is None:
            return
        review = approval.review
        try:
            text = await asyncio.wait_for(self._ask(approval), self.timeout)
        except TimeoutError:
            review.note = f"reviewer failed: no answer within {self.timeout:g} s"
        except SkillError as exc:
            review.note = f"reviewer failed: {bounded(redact(exc.message), 500)}"
        except Exception as exc:  # any other failure is still only a note on the card
            LOG.exception("the reviewer failed on approval %s", approval_id)
            review.note = f"reviewer failed: {bounded(redact(str(exc)), 500)}"
        else:
            review.opinion = bounded(redact(text.strip()), OPINION_CHARS)
            review.decision = decision_of(text)
            if review.decision is None:
                review.note = (
                    "reviewer failed: its answer ends without `Decision: approve` or "
                    "`Decision: reject`"
                )
        review.status = "done" if review.decision else "failed"
        opinions.attach(approval_id, review, counts=self.counts)

    async def _ask(self, approval: Approval) -> str:
        persona = self.m.registry.persona(self.persona)
        model = persona.model or self.m.settings.llm_model
        if not model:
            raise SkillError("no model: set ONGRID_LLM_MODEL or the reviewer persona's model")
        provider = self.provider_factory(ProviderConfig.from_settings(self.m.settings, model))
        system = f"{persona.prompt.strip()}\n\n{RULES}".strip()
        try:
            turn = await provider.complete(system, [UserText(self.request_text(approval))], [])
        finally:
            await provider.close()
        return turn.text

    def request_text(self, approval: Approval) -> str:
        """What the reviewer reads of a request."""
        lines = [
            f"Approval request {approval.id}: skill {approval.skill} (class "
            f"{approval.skill_class}), {approval.signatures_required} human signature(s) "
            f"required, requested by {approval.requested_by}"
            + (f" as persona {approval.persona}" if approval.persona else "")
            + ".",
            "",
        ]
        skill = self.m.registry.skills.get(approval.skill)
        if skill is not None:
            schema = json.dumps(skill.schema, ensure_ascii=False, sort_keys=True)
            lines += [
                "The skill's definition:",
                f"description: {skill.description}",
                f"class: {skill.skill_class.value}",
                f"input schema: {bounded(schema, SCHEMA_CHARS)}",
                "",
            ]
        args = json.dumps(mask_secrets(approval.args), ensure_ascii=False, indent=2, default=str)
        lines += ["The frozen args (exactly what would run):", bounded(args, ARGS_CHARS), ""]
        asked = self.asking_messages(approval.requested_by)
        if asked:
            lines += ["The asking agent run's last messages:", *asked, ""]
        preview = preview_section(approval)
        lines += ["Preview:", preview or "none (no preview of this call)", ""]
        lines.append("Your opinion, ending with `Decision: approve` or `Decision: reject`:")
        return "\n".join(lines)

    def asking_messages(self, requested_by: str) -> list[str]:
        if not requested_by.startswith(AGENT_PREFIX):
            return []
        run_id = requested_by.removeprefix(AGENT_PREFIX)
        said = [m for m in RunStore(self.m.store).messages(run_id) if m.role != "pending"]
        return [transcript_line(m) for m in said[-LAST_MESSAGES:]]
