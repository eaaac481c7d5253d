"""The reviewer's opinion of an approval request (SPEC §19): where its review stands, claimed by
one manager (``review_status``), and the opinion, its decision or the reviewer's failure
(``review``).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("review_status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("review", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.drop_column("review")
        batch.drop_column("review_status")
