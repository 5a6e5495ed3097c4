"""`quantroute db upgrade`: create or upgrade the schema (every migration branch)."""

from __future__ import annotations

import click


@click.group()
def db() -> None:
    """Database schema."""


@db.command()
@click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or sqlite:///data/quantroute.db)")
def upgrade(db_url: str | None) -> None:
    """Create or upgrade the schema to the newest revision of every branch."""
    from quantroute.db.engine import database_url, init_db, make_engine

    init_db(make_engine(db_url))
    click.echo(f"schema up to date: {database_url(db_url).split('@')[-1]}")
