"""Alembic environment: the connection comes from ``gpuaas.store``, never from an ini file."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import gpuaas.store._models  # noqa: F401  (registers the tables on SQLModel.metadata)

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
