"""What the approval desk tells its listeners: one :class:`ApprovalEvent` per committed change.

The desk calls each listener after the transaction that made the change has committed, with the
request as it is now (signatures so far included). A listener must return at once and must never
raise into the desk: it queues what it needs and does its work elsewhere. This module holds data
and the port only; it must never do I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ongrid_skills.store.approvals import Approval

LOG = logging.getLogger("ongrid_skills.notify")

#: The kinds, named after the audit actions of the desk (``approval.<kind>``).
#: ``reviewed``: the reviewer's opinion (or its failure) was attached (``approval.reviewed``).
#: ``previewed``: the request's preview ended, its result or failure attached (SPEC §20).
KINDS = (
    "requested",
    "signed",
    "approved",
    "rejected",
    "expired",
    "void",
    "cancelled",
    "reviewed",
    "previewed",
)


@dataclass(frozen=True, slots=True)
class ApprovalEvent:
    """``kind`` happened to ``approval`` (read back after the commit), done by ``actor``.

    ``note`` is the signer's comment, or the reason the request ended."""

    kind: str
    approval: Approval
    actor: str
    note: str | None = None

    @property
    def action(self) -> str:
        """The audit action of the change: ``approval.requested``, ``approval.signed``…"""
        return f"approval.{self.kind}"


@dataclass(frozen=True, slots=True)
class Notice:
    """A message for the approval webhooks' channels that is not an approval event: what a
    trigger or a schedule started ended. ``action`` names it in the audit entries of its
    deliveries (``trigger.outcome``), ``subject`` is what it is about (a start or firing id),
    ``body`` the webhook body as sent (``{"text": …, "blocks": […]}``)."""

    action: str
    subject: str
    body: dict[str, Any]
    execution_id: str | None = None


#: The port: called with each event, on the desk's thread; returns at once, never raises.
ApprovalListener = Callable[[ApprovalEvent], None]


class Listeners(list[ApprovalListener]):
    """The desk's listeners; :meth:`tell` calls each, and one that raises is logged, never
    allowed to fail the decision that was just committed (nor keep the others from hearing)."""

    def tell(self, event: ApprovalEvent) -> None:
        for listener in list(self):
            try:
                listener(event)
            except Exception:
                LOG.exception("an approval listener failed on %s", event.action)
