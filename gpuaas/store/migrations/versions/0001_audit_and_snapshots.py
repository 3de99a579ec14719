"""Audit log (append-only, enforced by triggers) and snapshots.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", _TS, nullable=False),
        sa.Column("flow", sa.String(64), nullable=False),
        sa.Column("flow_run_id", sa.String(64)),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(253)),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("uid", sa.String(64)),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(2000), nullable=False, server_default=""),
        sa.Column("evidence", sa.JSON, nullable=False),
        sa.Column("before", sa.JSON),
        sa.Column("after", sa.JSON),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("refers_to", sa.Integer),
    )
    for column in ("created_at", "flow", "namespace", "name", "idempotency_key", "refers_to"):
        op.create_index(f"ix_audit_log_{column}", "audit_log", [column])
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("collected_at", _TS, nullable=False),
        sa.Column("summary", sa.JSON, nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
    )
    op.create_index("ix_snapshots_collected_at", "snapshots", ["collected_at"])
    _forbid_audit_changes()


def _forbid_audit_changes() -> None:
    """The audit log is append-only in the database itself, whoever connects."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION gpuaas_audit_append_only() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'audit_log is append-only'; END; $$ LANGUAGE plpgsql"
        )
        op.execute(
            "CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log "
            "FOR EACH ROW EXECUTE FUNCTION gpuaas_audit_append_only()"
        )
    else:
        for verb in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER audit_log_no_{verb.lower()} BEFORE {verb} ON audit_log "
                "BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS gpuaas_audit_append_only()")
    op.drop_table("snapshots")
    op.drop_table("audit_log")
