"""Per-queue and per-tenant history every cycle; full snapshots compressed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "queue_history",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collected_at", _TS, nullable=False),
        sa.Column("cluster_queue", sa.String(253), nullable=False),
        sa.Column("flavor", sa.String(253), nullable=False, server_default=""),
        sa.Column("cohort", sa.String(253)),
        sa.Column("tenant", sa.String(253)),
        sa.Column("nominal_gpus", sa.Float, nullable=False),
        sa.Column("usage_gpus", sa.Float, nullable=False),
        sa.Column("reserved_gpus", sa.Float, nullable=False),
        sa.Column("borrowed_gpus", sa.Float, nullable=False),
        sa.Column("borrowing_limit_gpus", sa.Float),
        sa.Column("pending_workloads", sa.Integer, nullable=False),
        sa.Column("pending_gpus", sa.Float, nullable=False),
        sa.Column("oldest_pending_seconds", sa.Float),
        sa.Column("admitted_workloads", sa.Integer, nullable=False),
    )
    op.create_index("ix_queue_history_collected_at", "queue_history", ["collected_at"])
    op.create_index("ix_queue_history_cluster_queue", "queue_history", ["cluster_queue"])
    op.create_table(
        "tenant_history",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collected_at", _TS, nullable=False),
        sa.Column("tenant", sa.String(253), nullable=False),
        sa.Column("workloads", sa.Integer, nullable=False),
        sa.Column("allocated_gpus", sa.Float, nullable=False),
        sa.Column("idle_gpus", sa.Float, nullable=False),
        sa.Column("unknown_gpus", sa.Float, nullable=False),
        sa.Column("pending_gpus", sa.Float, nullable=False),
    )
    op.create_index("ix_tenant_history_collected_at", "tenant_history", ["collected_at"])
    op.create_index("ix_tenant_history_tenant", "tenant_history", ["tenant"])
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("compressed", sa.LargeBinary))


def downgrade() -> None:
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("compressed")
    op.drop_table("tenant_history")
    op.drop_table("queue_history")
