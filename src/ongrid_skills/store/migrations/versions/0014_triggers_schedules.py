"""Triggers and schedules (SPEC §21): alert triggers and what they started, schedules and their
firings (each claimed once by its unique (schedule, fire time) row), and the context of an
approval request (the alert that asked for it).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("approvals", sa.Column("context", sa.JSON(), nullable=True))
    op.create_table(
        "triggers",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "trigger_starts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("trigger", sa.String(64), nullable=False, index=True),
        sa.Column("rule", sa.String(64), nullable=False),
        sa.Column("dedupe", sa.String(300), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target_id", sa.String(32), nullable=True),
        sa.Column("alert", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False, index=True),
        sa.Column("resolved_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("trigger", "dedupe"),
    )
    op.create_table(
        "schedules",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("paused", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("base", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "schedule_firings",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("schedule", sa.String(64), nullable=False, index=True),
        sa.Column("fire_time", sa.Float(), nullable=False),
        sa.Column("how", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("target_id", sa.String(32), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("replica_id", sa.String(32), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("schedule", "fire_time"),
    )


def downgrade() -> None:
    op.drop_table("schedule_firings")
    op.drop_table("schedules")
    op.drop_table("trigger_starts")
    op.drop_table("triggers")
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("context")
