"""What the chat pages show (SPEC §19): their typed contexts and the functions that fill them.

:class:`ChatHome` is ``/chat`` (the personas the principal may use, their own runs);
:class:`Conversation` is one run, ``/chat/{id}``, its whole transcript built from its typed parts
(each model reply with its tool calls, each call with its result and, when it waited for one, its
approval card). :class:`ChatCard` is an approval request as the chat shows it, rendered alone
for the page script when a request appears or changes. The buttons are the gate's answer for the
viewer (``approval_cards.decision_problems``, with who started the run); the desk asks again.

Nothing a model or a skill wrote becomes markup: the templates autoescape it, and
:func:`shown` makes control characters (terminal escapes, bidi overrides) visible as ``\\xNN``
escapes, indents JSON, and says when a long text is folded or cut.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ongrid_skills.agent.runs import RunRecord
from ongrid_skills.agent.transcript import ApprovalWait, ModelReply, Part, ToolResult, UserText
from ongrid_skills.doors.web.approval_cards import AGENT_PREFIX, decision_problems
from ongrid_skills.governance.gate import may_cancel
from ongrid_skills.governance.principal import Principal
from ongrid_skills.skills.persona import Persona
from ongrid_skills.store.approvals import Approval, Signature

#: C0 and C1 controls but newline and tab, DEL, and the bidirectional overrides and isolates.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: A text longer than this many lines or characters is folded (details/summary).
FOLD_LINES = 12
FOLD_CHARS = 1500
#: Characters of one text a page shows at most (the execution's page has the rest).
SHOWN_CHARS = 200_000


def visible(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``, ``\\u202e``)."""

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return CONTROL.sub(escape, text)


@dataclass(frozen=True, slots=True)
class Shown:
    """A text as a page shows it: JSON indented, controls visible, maybe folded or cut."""

    text: str = field(metadata={"help": "what the page shows (escaped by the template)"})
    is_json: bool = field(metadata={"help": "the text was JSON, shown indented"})
    lines: int = field(metadata={"help": "how many lines it has (the fold's summary says it)"})
    folded: bool = field(metadata={"help": "long: shown inside a closed details element"})
    cut: int = field(metadata={"help": "characters left out past SHOWN_CHARS (0: none)"})


def shown(text: str) -> Shown:
    """A model's or a skill's text, ready to be shown as text."""
    is_json = False
    try:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        is_json = True
    except (ValueError, RecursionError):
        pass
    cut = max(0, len(text) - SHOWN_CHARS)
    text = visible(text[:SHOWN_CHARS])
    lines = text.count("\n") + 1
    return Shown(text, is_json, lines, lines > FOLD_LINES or len(text) > FOLD_CHARS, cut)


@dataclass(frozen=True, slots=True)
class ChatCard:
    """An approval request of a run, as its chat shows it."""

    approval: Approval = field(metadata={"help": "the request as the desk has it now"})
    run_id: str = field(metadata={"help": "the run that asked (the forms come back to it)"})
    args: Shown = field(metadata={"help": "the frozen args, indented"})
    approve_problem: str | None = field(metadata={"help": "why no Confirm/Approve button"})
    reject_problem: str | None = field(metadata={"help": "why no Reject button"})
    starter: bool = field(metadata={"help": "the viewer started the run (they confirm)"})
    back: str = field(default="", metadata={"help": "the chat its forms come back to"})

    @property
    def pending(self) -> bool:
        return self.approval.status == "pending"

    @property
    def missing(self) -> int:
        return max(0, self.approval.signatures_required - len(self.approval.approvals))

    @property
    def signers(self) -> list[Signature]:
        return self.approval.approvals

    @property
    def verb(self) -> str:
        """ "Confirm" for the one confirmation its run's starter gives, else "Approve"."""
        return "Confirm" if self.starter and self.approval.signatures_required == 1 else "Approve"


def chat_card(
    approval: Approval, run: RunRecord, viewer: Principal, back: str | None = None
) -> ChatCard:
    """``back``: the chat the card is shown in (a delegated run's card is shown in the chat of
    the run at the top; its forms come back there). Default: the run's own."""
    approve, reject = decision_problems(approval, viewer, run.requested_by)
    return ChatCard(
        approval=approval,
        run_id=run.id,
        args=shown(json.dumps(approval.args, ensure_ascii=False)),
        approve_problem=approve,
        reject_problem=reject,
        starter=viewer.name == run.requested_by,
        back=back or run.id,
    )


def asked_by(approval: Approval, run_id: str) -> bool:
    """Whether ``run_id``'s agent made the request (the only cards its chat shows)."""
    return approval.requested_by == AGENT_PREFIX + run_id


@dataclass(slots=True)
class CallView:
    """A tool call of a model reply: its args, then its approval card and result as they come."""

    id: str
    name: str
    args: Shown
    card: ChatCard | None = None
    status: str | None = None  # the result's status (None: no result yet)
    result: Shown | None = None
    is_error: bool = False
    execution_id: str | None = None
    child: RunRecord | None = None  # the run a ``delegate`` call started


@dataclass(frozen=True, slots=True)
class Item:
    """One turn of the conversation: what the user said, or a model reply with its calls."""

    role: str  # "user" or "assistant"
    text: Shown
    calls: list[CallView]


@dataclass(frozen=True, slots=True)
class ChatHome:
    """``/chat``: start a conversation, reopen one of one's own."""

    personas: list[Persona] = field(metadata={"help": "the personas the viewer may use"})
    chosen: str = field(metadata={"help": "the persona selected at first"})
    runs: list[RunRecord] = field(metadata={"help": "the viewer's own runs, newest first"})


@dataclass(frozen=True, slots=True)
class Conversation:
    """``/chat/{id}``: one run, its whole transcript, and what the viewer may do with it."""

    run: RunRecord = field(metadata={"help": "the run as stored now"})
    items: list[Item] = field(metadata={"help": "the transcript, turn by turn"})
    may_send: bool = field(metadata={"help": "the viewer started it and it has ended"})
    may_stop: bool = field(metadata={"help": "it is going and the viewer may cancel it"})
    children: list[RunRecord] = field(
        default_factory=list, metadata={"help": "the runs its delegate calls started"}
    )

    @property
    def events(self) -> str:
        return f"/chat/{self.run.id}/events"


def conversation(
    run: RunRecord,
    parts: list[Part],
    viewer: Principal,
    approvals: dict[str, Approval],
    children: list[RunRecord] | None = None,
) -> Conversation:
    """The page of ``run`` for ``viewer``; ``approvals`` by id, those its parts name;
    ``children``: the runs its ``delegate`` calls started."""
    items: list[Item] = []
    started = {c.parent_call_id: c for c in children or [] if c.parent_call_id}
    calls: dict[str, CallView] = {}
    for part in parts:
        if isinstance(part, UserText):
            items.append(Item("user", shown(part.text), []))
        elif isinstance(part, ModelReply):
            views = [
                CallView(c.id, c.name, shown(c.arguments), child=started.get(c.id))
                for c in part.tool_calls
            ]
            calls.update((v.id, v) for v in views)
            items.append(Item("assistant", shown(part.text), views))
        elif isinstance(part, ToolResult) and part.tool_call_id in calls:
            view = calls[part.tool_call_id]
            view.status, view.result = part.status, shown(part.content)
            view.is_error, view.execution_id = part.is_error, part.execution_id
        elif isinstance(part, ApprovalWait) and part.tool_call_id in calls:
            approval = approvals.get(part.approval_id or "")
            if approval is not None:
                calls[part.tool_call_id].card = chat_card(approval, run, viewer)
    final = run.status.final
    return Conversation(
        run=run,
        items=items,
        # A delegated run is continued through its parent's conversation (the service says so).
        may_send=final and viewer.name == run.requested_by and run.parent_run_id is None,
        may_stop=not final and may_cancel(viewer, run.requested_by),
        children=list(children or []),
    )


def approval_ids(parts: list[Part]) -> list[str]:
    return [p.approval_id for p in parts if isinstance(p, ApprovalWait) and p.approval_id]
