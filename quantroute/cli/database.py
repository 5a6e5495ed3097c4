"""The database as CLI commands open it: at this code's schema revision, or a clear error (never an upgrade:
that is `quantroute db upgrade`'s job alone)."""

from __future__ import annotations

import click
from sqlalchemy.engine import Engine


def open_engine(db_url: str | None) -> Engine:
    from quantroute.db.engine import make_engine, require_schema
    from quantroute.db.schema import SchemaMismatchError

    engine = make_engine(db_url)
    try:
        return require_schema(engine)
    except SchemaMismatchError as e:
        engine.dispose()
        raise click.ClickException(str(e)) from None
