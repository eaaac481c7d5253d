"""Executions keep the indexes their reads use and no more: the single-column indexes on
``skill`` and ``status`` go, since ``(skill, created_at)`` and ``(status, created_at)`` serve
every query by skill or status as well. Each index is written on every call (the row before the
spawn, the outcome after), so a redundant one is pages written and checkpointed for nothing.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_executions_skill", table_name="executions")
    op.drop_index("ix_executions_status", table_name="executions")


def downgrade() -> None:
    op.create_index("ix_executions_status", "executions", ["status"])
    op.create_index("ix_executions_skill", "executions", ["skill"])
