"""One audit row per decision: a unique (idempotency_key, decision) index.

Two overlapping runs that judge the same window used to record its decisions twice (each read
"not decided yet", then each appended). ``decision`` is the outcome and the attempt of the
row that decides a key (``planned#0``); completion rows leave it NULL, and NULLs are distinct in
a unique index on SQLite and PostgreSQL alike, so only decisions are constrained.
``Store.append_decision`` inserts with ``ON CONFLICT DO NOTHING``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN, not a batch copy: on SQLite a batch would rebuild audit_log and drop its
    # append-only triggers with the old table.
    op.add_column("audit_log", sa.Column("decision", sa.String(40), nullable=True))
    op.create_index("uq_audit_log_decision", "audit_log", ["idempotency_key", "decision"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_audit_log_decision", table_name="audit_log")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE audit_log DROP COLUMN decision")  # SQLite >= 3.35, keeps the triggers
    else:
        op.drop_column("audit_log", "decision")
