"""The provenance of a pending pack install: the source, signer and trust of what it makes
active, written into the version's row when the change is committed, so that an install of
files still kept from an earlier install records its own source, signer, who and when.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pack_changes") as batch:
        batch.add_column(sa.Column("source", sa.Text(), nullable=True))
        batch.add_column(sa.Column("signer", sa.String(64), nullable=True))
        batch.add_column(sa.Column("trust", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pack_changes") as batch:
        batch.drop_column("trust")
        batch.drop_column("signer")
        batch.drop_column("source")
