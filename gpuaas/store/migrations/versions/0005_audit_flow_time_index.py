"""The audit log's reads by flow in time order served by one index: (flow, created_at, id).

Every flow reads its own rows of a window in the order the store lists them (``created_at``, then
``id``): a recovery's lookback, the rebalance's recent moves, ``gpuaas audit list --flow``. With an
index on ``flow`` alone, SQLite fetched every row the flow ever wrote and sorted them; with this one
it reads the window, already in order, and stops at the limit, in either direction.

Two indexes go: ``ix_audit_log_flow`` is the new index's leading column, and
``ix_audit_log_idempotency_key`` the leading column of the unique (idempotency_key, decision) index
of 0004; either database answers a lookup by that column alone from the longer index, and each
index dropped is one write less on every append.

Plain CREATE/DROP INDEX, not a batch copy: on SQLite a batch would rebuild audit_log and drop its
append-only triggers with the old table.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

FLOW_TIME = "ix_audit_log_flow_created_at_id"


def upgrade() -> None:
    op.create_index(FLOW_TIME, "audit_log", ["flow", "created_at", "id"])
    op.drop_index("ix_audit_log_flow", table_name="audit_log")
    op.drop_index("ix_audit_log_idempotency_key", table_name="audit_log")


def downgrade() -> None:
    op.create_index("ix_audit_log_idempotency_key", "audit_log", ["idempotency_key"])
    op.create_index("ix_audit_log_flow", "audit_log", ["flow"])
    op.drop_index(FLOW_TIME, table_name="audit_log")
