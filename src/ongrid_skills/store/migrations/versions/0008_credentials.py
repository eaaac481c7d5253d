"""Credentials and their bindings to skill slots (SPEC §18); the credential names an approval
request was made with.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "credentials",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("fields", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("rotated_by", sa.String(128), nullable=True),
        sa.Column("rotated_at", sa.Float(), nullable=True),
        sa.Column("last_used_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "credential_bindings",
        sa.Column("target", sa.String(80), primary_key=True),
        sa.Column("slot", sa.String(64), primary_key=True),
        sa.Column("credential", sa.String(64), sa.ForeignKey("credentials.name"), nullable=False),
        sa.Column("bound_by", sa.String(128), nullable=False),
        sa.Column("bound_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_credential_bindings_credential", "credential_bindings", ["credential"])
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("credentials", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("credentials")
    op.drop_index("ix_credential_bindings_credential", "credential_bindings")
    op.drop_table("credential_bindings")
    op.drop_table("credentials")
