"""Alembic environment. The engine is handed in by `quantroute.db.engine.init_db` (no URL parsing here)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

from quantroute.db import tables  # noqa: F401 - registers every table on SQLModel.metadata

target_metadata = SQLModel.metadata


def run_migrations() -> None:
    engine = context.config.attributes.get("engine")
    if engine is None:
        from quantroute.db.engine import make_engine

        engine = make_engine()
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=connection.dialect.name == "sqlite")
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


run_migrations()
