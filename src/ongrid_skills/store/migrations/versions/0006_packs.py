"""Installed packs: one row per installed version of a pack, and the changes of a pack's active
version begun but not yet committed (see ongrid_skills.packs.records).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pack_versions",
        sa.Column("home", sa.String(32), primary_key=True),
        sa.Column("pack_id", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(128), primary_key=True),
        sa.Column("digest", sa.String(71), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("signer", sa.String(64), nullable=True),
        sa.Column("trust", sa.String(16), nullable=False),
        sa.Column("layout", sa.String(24), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("homepage", sa.Text(), nullable=True),
        sa.Column("skills", sa.JSON(), nullable=False),
        sa.Column("personas", sa.JSON(), nullable=False),
        sa.Column("keep_seconds", sa.Integer(), nullable=False),
        sa.Column("installed_by", sa.String(128), nullable=False),
        sa.Column("installed_at", sa.Float(), nullable=False),
        sa.Column("activated_at", sa.Float(), nullable=True),
        sa.Column("withdrawn_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "pack_changes",
        sa.Column("home", sa.String(32), primary_key=True),
        sa.Column("pack_id", sa.String(64), primary_key=True),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("from_version", sa.String(128), nullable=True),
        sa.Column("to_version", sa.String(128), nullable=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("pack_changes")
    op.drop_table("pack_versions")
