"""SQLAlchemy models: the tables of the embedded (SQLite) or shared (PostgreSQL) store.

Times are UNIX seconds (float, UTC); JSON columns hold the exact documents the API shows.
Table definitions only: the schema is created and changed by the Alembic migrations in
``store/migrations/versions`` (never by ``create_all``), so a change here must come with one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """The declarative base; ``dict`` and ``Any`` annotations map to JSON columns."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, Any: JSON}


class ExecutionRow(Base):
    """One call of a skill: written before the spawn, updated with its outcome."""

    __tablename__ = "executions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    skill: Mapped[str] = mapped_column(String(64))  # indexed with created_at (below)
    status: Mapped[str] = mapped_column(String(24))  # indexed with created_at (below)
    args: Mapped[Any] = mapped_column(JSON)
    result_text: Mapped[str | None] = mapped_column(Text)
    error: Mapped[Any] = mapped_column(JSON, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    signal: Mapped[str | None] = mapped_column(String(32))
    stderr_tail: Mapped[str] = mapped_column(Text, default="")
    orphans_killed: Mapped[int] = mapped_column(Integer, default=0)
    persona: Mapped[str | None] = mapped_column(String(128))
    requested_by: Mapped[str | None] = mapped_column(String(128))
    approval_id: Mapped[str | None] = mapped_column(String(32))
    definition_hash: Mapped[str | None] = mapped_column(String(64))
    idempotency_key: Mapped[str | None] = mapped_column(String(300), unique=True)
    args_hash: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float, index=True)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    duration_ms: Mapped[float | None] = mapped_column(Float)
    # The replica (its lease id) running the call; None on the embedded store (migration 0005).
    replica_id: Mapped[str | None] = mapped_column(String(32))


class EventRow(Base):
    """One numbered event of an execution's timeline (status, stderr, progress, …)."""

    __tablename__ = "execution_events"
    __table_args__ = (UniqueConstraint("execution_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    execution_id: Mapped[str] = mapped_column(String(32), ForeignKey("executions.id"))
    seq: Mapped[int] = mapped_column(Integer)
    ts: Mapped[float] = mapped_column(Float)
    type: Mapped[str] = mapped_column(String(32))
    data: Mapped[Any] = mapped_column(JSON)


class ApprovalRow(Base):
    """One approval request: the frozen call and where it stands (pending, approved, …)."""

    __tablename__ = "approvals"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    execution_id: Mapped[str] = mapped_column(String(32), index=True)
    skill: Mapped[str] = mapped_column(String(64))
    skill_class: Mapped[str] = mapped_column(String(16))
    args: Mapped[Any] = mapped_column(JSON)
    definition_hash: Mapped[str] = mapped_column(String(64))
    persona: Mapped[str | None] = mapped_column(String(128))
    requested_by: Mapped[str] = mapped_column(String(128))
    requested_role: Mapped[str | None] = mapped_column(String(16))  # None: before migration 0003
    signatures_required: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    decided_at: Mapped[float | None] = mapped_column(Float)
    # The credentials the call will use, slot -> credential name (migration 0008); a request
    # is void once one of them is rebound.
    credentials: Mapped[Any] = mapped_column(JSON, nullable=True)
    # The reviewer's opinion (migration 0010): ``review_status`` is None (no review), reviewing
    # (claimed by one manager), done or failed; ``review`` holds the opinion or the failure.
    review_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    review: Mapped[Any] = mapped_column(JSON, nullable=True)
    # What the card shows signers besides the args (migration 0011): install_skill's summary.
    preview: Mapped[Any] = mapped_column(JSON, nullable=True)
    # What started the call, for the signers: the alert of a trigger (migration 0014).
    context: Mapped[Any] = mapped_column(JSON, nullable=True)


class SignatureRow(Base):
    """One signer's decision on a request; the unique key makes a second signature fail."""

    __tablename__ = "approval_signatures"
    __table_args__ = (UniqueConstraint("approval_id", "principal"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    approval_id: Mapped[str] = mapped_column(String(32), ForeignKey("approvals.id"), index=True)
    principal: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    decision: Mapped[str] = mapped_column(String(16))  # approve | reject
    comment: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)


class AuditRow(Base):
    """One audit entry; ``hash`` chains it to the entry before (``prev_hash``)."""

    __tablename__ = "audit_entries"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    ts: Mapped[float] = mapped_column(Float)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64), index=True)
    subject: Mapped[str | None] = mapped_column(String(128))
    data: Mapped[Any] = mapped_column(JSON)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class TokenRow(Base):
    """An API token: only its SHA-256 is stored, never the token itself."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)


class SettingRow(Base):
    """Key/value records of the store itself; ``audit_head`` is the audit chain's head.

    Why a head record: the hash chain shows an entry edited or deleted in the middle, but
    deleting the newest entries leaves a shorter chain that is still valid. The head (last seq
    and hash), rewritten in the transaction of every entry, says where the chain must end. Its
    row is also where writers queue: ``AuditLog.append`` reads it ``FOR UPDATE`` on PostgreSQL
    (SQLite's ``BEGIN IMMEDIATE`` serialises writers already), so no two entries share a seq.
    """

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON, nullable=True)  # as migration 0001 created it


class AgentRunRow(Base):
    """One agent run (SPEC §8): a conversation of the agent kernel with a model (migration 0002)."""

    __tablename__ = "agent_runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    persona: Mapped[str] = mapped_column(String(128))
    requested_by: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))  # the requester's role: the run's calls use it
    # running | waiting_approval | done | failed | max_turns | interrupted | cancelled
    status: Mapped[str] = mapped_column(String(24), index=True)
    provider: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    turns: Mapped[int] = mapped_column(Integer, default=0)  # model requests for the last message
    created_at: Mapped[float] = mapped_column(Float, index=True)
    finished_at: Mapped[float | None] = mapped_column(Float)
    final_answer: Mapped[str | None] = mapped_column(Text)
    error: Mapped[Any] = mapped_column(JSON, nullable=True)
    # The replica (its lease id) driving the run; None on the embedded store (migration 0005).
    replica_id: Mapped[str | None] = mapped_column(String(32))
    # A delegated run: the run whose ``delegate`` call started it, that call, and how deep it
    # is (0: started by a human; migration 0013).
    parent_run_id: Mapped[str | None] = mapped_column(String(32), index=True)
    parent_call_id: Mapped[str | None] = mapped_column(String(200))
    depth: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class AgentMessageRow(Base):
    """One transcript entry of a run, in the neutral format (docs/agent.md)."""

    __tablename__ = "agent_messages"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("agent_runs.id"))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))  # user | assistant | tool | pending
    content: Mapped[Any] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)


class AgentEventRow(Base):
    """The event timeline of a run (message, tool_start, stderr, …, done), for SSE replay."""

    __tablename__ = "agent_events"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(32), ForeignKey("agent_runs.id"))
    seq: Mapped[int] = mapped_column(Integer)
    ts: Mapped[float] = mapped_column(Float)
    type: Mapped[str] = mapped_column(String(32))
    data: Mapped[Any] = mapped_column(JSON)


class WebSessionRow(Base):
    """A web console session (migration 0004): only a SHA-256 of its id is stored; it acts with
    the role of the API token it was opened with, and only while that token is not revoked."""

    __tablename__ = "web_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[str] = mapped_column(String(32), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    seen_at: Mapped[float] = mapped_column(Float)  # the idle expiry counts from here
    expires_at: Mapped[float] = mapped_column(Float, index=True)  # the absolute expiry


class ReplicaRow(Base):
    """The lease of one manager process on a shared database (migration 0005).

    ``id`` is new at every start, so a replica restarting never holds the calls of the process
    it replaces. Times are the database server's clock (see ``store.leases``).
    """

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[float] = mapped_column(Float)
    renewed_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class PackVersionRow(Base):
    """One installed version of a pack (migration 0006). ``home`` is the id of the data dir
    whose ``packs/`` holds its files: on a shared database each replica records its own."""

    __tablename__ = "pack_versions"

    home: Mapped[str] = mapped_column(String(32), primary_key=True)
    pack_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[str] = mapped_column(String(128), primary_key=True)
    digest: Mapped[str] = mapped_column(String(71))
    source: Mapped[str] = mapped_column(Text)
    signer: Mapped[str | None] = mapped_column(String(64))
    trust: Mapped[str] = mapped_column(String(16))
    layout: Mapped[str] = mapped_column(String(24))
    description: Mapped[str] = mapped_column(Text)
    homepage: Mapped[str | None] = mapped_column(Text)
    skills: Mapped[Any] = mapped_column(JSON)
    personas: Mapped[Any] = mapped_column(JSON)
    keep_seconds: Mapped[int] = mapped_column(Integer)
    installed_by: Mapped[str] = mapped_column(String(128))
    installed_at: Mapped[float] = mapped_column(Float)
    activated_at: Mapped[float | None] = mapped_column(Float)
    withdrawn_at: Mapped[float | None] = mapped_column(Float)
    # What the version brings, as its install summarised it (migration 0011; None before).
    summary: Mapped[Any] = mapped_column(JSON, nullable=True)


class PackChangeRow(Base):
    """A change of a pack's active version begun and not yet committed or aborted (migration
    0006): at most one per pack and data dir (see ongrid_skills.packs.records)."""

    __tablename__ = "pack_changes"

    home: Mapped[str] = mapped_column(String(32), primary_key=True)
    pack_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    action: Mapped[str] = mapped_column(String(16))
    from_version: Mapped[str | None] = mapped_column(String(128))
    to_version: Mapped[str | None] = mapped_column(String(128))
    actor: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    details: Mapped[Any] = mapped_column(JSON)
    # The provenance of what an install makes active (migration 0007; None for a rollback or
    # a removal): written into the version's row when the change is committed.
    source: Mapped[str | None] = mapped_column(Text)
    signer: Mapped[str | None] = mapped_column(String(64))
    trust: Mapped[str | None] = mapped_column(String(16))


class CredentialRow(Base):
    """A named credential (migration 0008): its fields, each a sealed value (AES-GCM, the key
    outside the database) or a reference read at call time; never a value in clear."""

    __tablename__ = "credentials"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    fields: Mapped[Any] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    rotated_by: Mapped[str | None] = mapped_column(String(128))
    rotated_at: Mapped[float | None] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)


class CredentialBindingRow(Base):
    """A credential bound to a slot: of one skill, or of every skill of one pack (migration
    0008). ``target`` is ``skill:<name>`` or ``pack:<id>``; one binding per target and slot."""

    __tablename__ = "credential_bindings"

    target: Mapped[str] = mapped_column(String(80), primary_key=True)
    slot: Mapped[str] = mapped_column(String(64), primary_key=True)
    credential: Mapped[str] = mapped_column(String(64), ForeignKey("credentials.name"), index=True)
    bound_by: Mapped[str] = mapped_column(String(128))
    bound_at: Mapped[float] = mapped_column(Float)


class PersonaRow(Base):
    """A persona written at run time (migration 0009): its document, the persona file's fields
    in JSON with ``prompt`` (skills/persona_doc.py). The ``personas_generation`` record of
    ``settings`` changes with every change of this table (how replicas notice one)."""

    __tablename__ = "personas"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    document: Mapped[Any] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(128))
    updated_at: Mapped[float | None] = mapped_column(Float)


class TriggerRow(Base):
    """An alert trigger (migration 0014): its rules in ``spec``, the SHA-256 of its token."""

    __tablename__ = "triggers"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64))
    spec: Mapped[Any] = mapped_column(JSON)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(128))
    updated_at: Mapped[float | None] = mapped_column(Float)


class TriggerStartRow(Base):
    """What one rule started for one firing alert; ``dedupe`` (rule, fingerprint, startsAt) is
    unique while the alert fires, so a repeated notification starts nothing new."""

    __tablename__ = "trigger_starts"
    __table_args__ = (UniqueConstraint("trigger", "dedupe"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    trigger: Mapped[str] = mapped_column(String(64), index=True)
    rule: Mapped[str] = mapped_column(String(64))
    dedupe: Mapped[str] = mapped_column(String(300))
    fingerprint: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))  # call | run | rate_limited | failed
    target_id: Mapped[str | None] = mapped_column(String(32))
    alert: Mapped[Any] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float, index=True)
    resolved_at: Mapped[float | None] = mapped_column(Float)


class ScheduleRow(Base):
    """A schedule (migration 0014): cron, time zone, what it starts, paused or not; ``base`` is
    the fire time from which the next one is computed (the last claimed, or when resumed)."""

    __tablename__ = "schedules"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    spec: Mapped[Any] = mapped_column(JSON)
    paused: Mapped[int] = mapped_column(Integer, default=0)
    base: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str | None] = mapped_column(String(128))
    updated_at: Mapped[float | None] = mapped_column(Float)


class ScheduleFiringRow(Base):
    """One firing of a schedule, claimed by inserting it: (schedule, fire_time) is unique, so
    with replicas each firing runs exactly once."""

    __tablename__ = "schedule_firings"
    __table_args__ = (UniqueConstraint("schedule", "fire_time"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    schedule: Mapped[str] = mapped_column(String(64), index=True)
    fire_time: Mapped[float] = mapped_column(Float)
    how: Mapped[str] = mapped_column(String(16))  # on_time | missed | manual
    kind: Mapped[str] = mapped_column(String(16))  # call | run | skipped | failed
    target_id: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    replica_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[float] = mapped_column(Float)


Index("ix_executions_status_created", ExecutionRow.status, ExecutionRow.created_at)


class PreferenceRow(Base):
    """A console preference of one principal (migration 0012): the catalogue's view, say. A
    preference belongs to the principal's name, so every token and session of that name shares
    it; it decides nothing but how a page is shown."""

    __tablename__ = "preferences"

    principal: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[float] = mapped_column(Float)


# The catalogue's last-run column asks each shown skill's newest call (migration 0012).
Index("ix_executions_skill_created", ExecutionRow.skill, ExecutionRow.created_at)
