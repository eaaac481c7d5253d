"""The repository of approval requests and their signatures.

Rows in, rows out: every rule (who signs, when a request is void, when it runs) is the approval
desk's, and this module must never decide one. It offers the desk the two tools its decisions
rest on, :meth:`ApprovalRepo.locked` and :meth:`ApprovalRepo.claim`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Connection, Table, select

from ongrid_skills.execution.records import iso
from ongrid_skills.store.connection import Database
from ongrid_skills.store.models import ApprovalRow, SignatureRow
from ongrid_skills.store.prefix import id_starts_with

_APPROVALS = cast(Table, ApprovalRow.__table__)
_SIGNATURES = cast(Table, SignatureRow.__table__)


@dataclass(slots=True)
class Signature:
    """One decision on a request: ``approve`` or ``reject``, by one principal."""

    principal: str
    role: str
    decision: str
    created_at: float
    comment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "role": self.role,
            "decision": self.decision,
            "comment": self.comment,
            "at": iso(self.created_at),
        }


@dataclass(slots=True)
class Review:
    """The reviewer's opinion of a request (SPEC §19): advice, unless ``counted`` as the one
    confirmation of a mutating call. ``status``: reviewing, done or failed (``note`` says why)."""

    persona: str
    status: str  # reviewing | done | failed
    started_at: float
    decision: str | None = None  # approve | reject; None while reviewing or when it failed
    opinion: str | None = None  # masked and bounded by the reviewer
    note: str | None = None  # "reviewer failed: …"
    counted: bool = False  # it was the one confirmation of a mutating call
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "persona": self.persona,
            "status": self.status,
            "decision": self.decision,
            "opinion": self.opinion,
            "note": self.note,
            "counted": self.counted,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
        }

    def stored(self) -> dict[str, Any]:
        """The JSON of the ``review`` column (times as numbers)."""
        return {
            "persona": self.persona,
            "status": self.status,
            "decision": self.decision,
            "opinion": self.opinion,
            "note": self.note,
            "counted": self.counted,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }

    @staticmethod
    def of(data: Any) -> Review | None:
        if not isinstance(data, dict):
            return None
        return Review(
            persona=str(data.get("persona", "")),
            status=str(data.get("status", "failed")),
            started_at=float(data.get("started_at") or 0.0),
            decision=data.get("decision"),
            opinion=data.get("opinion"),
            note=data.get("note"),
            counted=bool(data.get("counted")),
            finished_at=data.get("finished_at"),
        )


@dataclass(slots=True)
class Approval:
    """One request: the frozen call (skill, args, definition hash), who asked, the signatures."""

    id: str
    execution_id: str
    skill: str
    skill_class: str
    args: Any
    definition_hash: str
    persona: str | None
    requested_by: str
    signatures_required: int
    status: str  # pending | approved | rejected | expired | void | cancelled
    created_at: float
    expires_at: float
    reason: str | None = None
    decided_at: float | None = None
    signatures: list[Signature] = field(default_factory=list)
    requested_role: str | None = None  # the requester's role when they asked
    credentials: dict[str, str] | None = None  # slot -> credential name the call will use
    review: Review | None = None  # the reviewer's opinion, when a reviewer is configured
    preview: dict[str, Any] | None = None  # what the card shows besides the args (0011)
    context: dict[str, Any] | None = None  # what asked for it: a trigger's alert (SPEC §21)

    @property
    def approvals(self) -> list[Signature]:
        """The approving signatures (rejections left out)."""
        return [s for s in self.signatures if s.decision == "approve"]

    def to_dict(self) -> dict[str, Any]:
        """The request as the REST API and the CLI show it."""
        return {
            "id": self.id,
            "execution_id": self.execution_id,
            "skill": self.skill,
            "class": self.skill_class,
            "args": self.args,
            "definition_hash": self.definition_hash,
            "persona": self.persona,
            "requested_by": self.requested_by,
            "signatures_required": self.signatures_required,
            "signatures_collected": len(self.approvals),
            "signatures": [s.to_dict() for s in self.signatures],
            "status": self.status,
            "reason": self.reason,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "decided_at": iso(self.decided_at),
            **({"credentials": self.credentials} if self.credentials else {}),
            **({"review": self.review.to_dict()} if self.review else {}),
            **({"preview": self.preview} if self.preview else {}),
            **({"context": self.context} if self.context else {}),
        }


class ApprovalRepo:
    """Approval rows and their signatures; writes run on the caller's transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, conn: Connection, approval: Approval) -> None:
        conn.execute(
            _APPROVALS.insert().values(
                id=approval.id,
                execution_id=approval.execution_id,
                skill=approval.skill,
                skill_class=approval.skill_class,
                args=approval.args,
                definition_hash=approval.definition_hash,
                persona=approval.persona,
                requested_by=approval.requested_by,
                requested_role=approval.requested_role,
                signatures_required=approval.signatures_required,
                status=approval.status,
                reason=approval.reason,
                created_at=approval.created_at,
                expires_at=approval.expires_at,
                decided_at=approval.decided_at,
                credentials=approval.credentials,
                preview=approval.preview,
                context=approval.context,
            )
        )

    def add_signature(self, conn: Connection, approval_id: str, signature: Signature) -> None:
        conn.execute(
            _SIGNATURES.insert().values(
                approval_id=approval_id,
                principal=signature.principal,
                role=signature.role,
                decision=signature.decision,
                comment=signature.comment,
                created_at=signature.created_at,
            )
        )

    def claim(
        self,
        conn: Connection,
        approval_id: str,
        *,
        expected: str,
        status: str,
        decided_at: float,
        reason: str | None = None,
    ) -> bool:
        """Move a request from ``expected`` to ``status`` only if it is still ``expected``.

        The conditional update is the claim: of two managers (or replicas) deciding the same
        request at the same moment, exactly one sees a row change; the other's transaction
        must roll back. On PostgreSQL the row lock makes the loser wait, then see 0 rows."""
        result = conn.execute(
            _APPROVALS.update()
            .where(_APPROVALS.c.id == approval_id, _APPROVALS.c.status == expected)
            .values(status=status, decided_at=decided_at, reason=reason)
        )
        return bool(result.rowcount)

    def claim_review(self, conn: Connection, approval_id: str, review: Review) -> bool:
        """Mark a request ``reviewing`` only if nobody reviews it yet: of two managers sharing
        the store, exactly one sees a row change and reviews it."""
        result = conn.execute(
            _APPROVALS.update()
            .where(_APPROVALS.c.id == approval_id, _APPROVALS.c.review_status.is_(None))
            .values(review_status=review.status, review=review.stored())
        )
        return bool(result.rowcount)

    def finish_review(self, conn: Connection, approval_id: str, review: Review) -> bool:
        """Record the finished review of a request this manager claimed (still ``reviewing``)."""
        result = conn.execute(
            _APPROVALS.update()
            .where(_APPROVALS.c.id == approval_id, _APPROVALS.c.review_status == "reviewing")
            .values(review_status=review.status, review=review.stored())
        )
        return bool(result.rowcount)

    def finish_preview(self, conn: Connection, approval_id: str, run: dict[str, Any]) -> bool:
        """Record the finished preview of a request (``preview.run``) only if the one stored is
        still running: of two writers, the first one stands. Other keys of ``preview`` (an
        install_skill's ``pack``) are kept."""
        query = select(_APPROVALS.c.preview).where(_APPROVALS.c.id == approval_id)
        if self.db.dialect != "sqlite":
            query = query.with_for_update()
        found = conn.execute(query).first()
        preview = found[0] if found is not None else None
        if not isinstance(preview, dict):
            return False
        current = preview.get("run")
        if not isinstance(current, dict) or current.get("status") != "running":
            return False
        conn.execute(
            _APPROVALS.update()
            .where(_APPROVALS.c.id == approval_id)
            .values(preview={**preview, "run": run})
        )
        return True

    def reviewing_ids(self, conn: Connection) -> list[str]:
        """The requests whose review was claimed and never finished (a manager stopped)."""
        rows = conn.execute(
            select(_APPROVALS.c.id).where(_APPROVALS.c.review_status == "reviewing")
        )
        return [r[0] for r in rows]

    def locked(self, conn: Connection, approval_id: str) -> Approval | None:
        """The request as it is inside the caller's write transaction, its row locked where the
        database can (``SELECT … FOR UPDATE``; SQLite's BEGIN IMMEDIATE already serialises)."""
        query = select(_APPROVALS).where(_APPROVALS.c.id == approval_id)
        if self.db.dialect != "sqlite":
            query = query.with_for_update()
        first = conn.execute(query).mappings().first()
        if first is None:
            return None
        approval = _from_row(first)
        approval.signatures = self._signatures(conn, [approval.id]).get(approval.id, [])
        return approval

    def get(self, approval_id: str, conn: Connection | None = None) -> Approval | None:
        """The request with its signatures, read on ``conn`` or on a read connection of its own."""
        if conn is None:
            with self.db.read() as own:
                return self.get(approval_id, own)
        row = conn.execute(select(_APPROVALS).where(_APPROVALS.c.id == approval_id)).mappings()
        first = row.first()
        if first is None:
            return None
        approval = _from_row(first)
        approval.signatures = self._signatures(conn, [approval.id]).get(approval.id, [])
        return approval

    def query(
        self, *, status: str | None = None, limit: int = 100, id_prefix: str | None = None
    ) -> list[Approval]:
        """Newest first, of one status when given, each with its signatures; ``id_prefix``:
        only the requests whose id starts with these hex digits."""
        query = select(_APPROVALS).order_by(_APPROVALS.c.created_at.desc()).limit(limit)
        if id_prefix:
            query = query.where(id_starts_with(_APPROVALS.c.id, id_prefix))
        if status:
            query = query.where(_APPROVALS.c.status == status)
        with self.db.read() as conn:
            approvals = [_from_row(r) for r in conn.execute(query).mappings()]
            signatures = self._signatures(conn, [a.id for a in approvals])
        for approval in approvals:
            approval.signatures = signatures.get(approval.id, [])
        return approvals

    def pending_ids(self, conn: Connection) -> list[tuple[str, float]]:
        """(id, expires_at) of every pending request, for the expiry sweep."""
        rows = conn.execute(
            select(_APPROVALS.c.id, _APPROVALS.c.expires_at).where(_APPROVALS.c.status == "pending")
        )
        return [(r[0], r[1]) for r in rows]

    def with_status(self, status: str) -> list[Approval]:
        """Every request of one status, unpaged (start-up recovery)."""
        return self.query(status=status, limit=100_000)

    @staticmethod
    def _signatures(conn: Connection, ids: list[str]) -> dict[str, list[Signature]]:
        if not ids:
            return {}
        rows = conn.execute(
            select(_SIGNATURES).where(_SIGNATURES.c.approval_id.in_(ids)).order_by(_SIGNATURES.c.id)
        ).mappings()
        out: dict[str, list[Signature]] = {}
        for r in rows:
            out.setdefault(r["approval_id"], []).append(
                Signature(r["principal"], r["role"], r["decision"], r["created_at"], r["comment"])
            )
        return out


def _from_row(row: Any) -> Approval:
    return Approval(
        id=row["id"],
        execution_id=row["execution_id"],
        skill=row["skill"],
        skill_class=row["skill_class"],
        args=row["args"],
        definition_hash=row["definition_hash"],
        persona=row["persona"],
        requested_by=row["requested_by"],
        signatures_required=row["signatures_required"],
        status=row["status"],
        reason=row["reason"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        decided_at=row["decided_at"],
        requested_role=row["requested_role"],
        credentials=row["credentials"],
        review=Review.of(row["review"]),
        preview=row["preview"],
        context=row["context"],
    )
