"""Personas written at run time (SPEC §19): ``POST/PUT/DELETE /v1/personas`` store them here.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "personas",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("personas")
    op.execute("DELETE FROM settings WHERE key = 'personas_generation'")
