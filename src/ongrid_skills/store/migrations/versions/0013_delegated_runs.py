"""Delegated agent runs: the run (and its tool call) that started a child run, and its depth.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("parent_run_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("parent_call_id", sa.String(200), nullable=True))
        batch.add_column(sa.Column("depth", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_agent_runs_parent_run_id", "agent_runs", ["parent_run_id"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_parent_run_id", "agent_runs")
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("depth")
        batch.drop_column("parent_call_id")
        batch.drop_column("parent_run_id")
