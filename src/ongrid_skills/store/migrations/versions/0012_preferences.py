"""Console preferences per principal (the catalogue's view), and an index for the newest call
of a skill (the catalogue table's last-run column).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "preferences",
        sa.Column("principal", sa.String(128), primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_executions_skill_created", "executions", ["skill", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_executions_skill_created", table_name="executions")
    op.drop_table("preferences")
