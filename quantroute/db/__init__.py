"""Persistence: SQLModel tables (one module per noun), the engine factory and Alembic migrations.

Nothing here holds module-level state: callers build an engine with `make_engine(url)` and hand it in."""
