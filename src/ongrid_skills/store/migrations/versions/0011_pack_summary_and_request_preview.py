"""The capability summary of an installed pack version (what it brings: skills with their
classes and scope, personas with their modes, requirements, warnings, signer), computed by
the install from the staged files and shown by ``GET /v1/packs/{id}``; and the preview of an
approval request (what its card shows besides the args: an install_skill request's summary).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("pack_versions") as batch:
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("preview", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("preview")
    with op.batch_alter_table("pack_versions") as batch:
        batch.drop_column("summary")
