"""Initial schema: executions, events, approvals, signatures, audit chain, tokens, settings.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "executions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("skill", sa.String(64), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("result_text", sa.Text()),
        sa.Column("error", sa.JSON()),
        sa.Column("exit_code", sa.Integer()),
        sa.Column("signal", sa.String(32)),
        sa.Column("stderr_tail", sa.Text(), nullable=False),
        sa.Column("orphans_killed", sa.Integer(), nullable=False),
        sa.Column("persona", sa.String(128)),
        sa.Column("requested_by", sa.String(128)),
        sa.Column("approval_id", sa.String(32)),
        sa.Column("definition_hash", sa.String(64)),
        sa.Column("idempotency_key", sa.String(300), unique=True),
        sa.Column("args_hash", sa.String(64)),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float()),
        sa.Column("finished_at", sa.Float()),
        sa.Column("duration_ms", sa.Float()),
    )
    op.create_index("ix_executions_skill", "executions", ["skill"])
    op.create_index("ix_executions_status", "executions", ["status"])
    op.create_index("ix_executions_created_at", "executions", ["created_at"])
    op.create_index("ix_executions_status_created", "executions", ["status", "created_at"])
    op.create_table(
        "execution_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("execution_id", sa.String(32), sa.ForeignKey("executions.id"), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.UniqueConstraint("execution_id", "seq"),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("execution_id", sa.String(32), nullable=False),
        sa.Column("skill", sa.String(64), nullable=False),
        sa.Column("skill_class", sa.String(16), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("definition_hash", sa.String(64), nullable=False),
        sa.Column("persona", sa.String(128)),
        sa.Column("requested_by", sa.String(128), nullable=False),
        sa.Column("signatures_required", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("decided_at", sa.Float()),
    )
    op.create_index("ix_approvals_execution_id", "approvals", ["execution_id"])
    op.create_index("ix_approvals_status", "approvals", ["status"])
    op.create_table(
        "approval_signatures",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("approval_id", sa.String(32), sa.ForeignKey("approvals.id"), nullable=False),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("comment", sa.Text()),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("approval_id", "principal"),
    )
    op.create_index("ix_approval_signatures_approval_id", "approval_signatures", ["approval_id"])
    op.create_table(
        "audit_entries",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("ts", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(128)),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_audit_entries_action", "audit_entries", ["action"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float()),
    )
    op.create_table(
        "settings",
        sa.Column("key", sa.String(128), primary_key=True),
        sa.Column("value", sa.JSON()),
    )


def downgrade() -> None:
    for table in (
        "settings",
        "api_tokens",
        "audit_entries",
        "approval_signatures",
        "approvals",
        "execution_events",
        "executions",
    ):
        op.drop_table(table)
