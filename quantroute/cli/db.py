"""`quantroute db upgrade|prune`: create or upgrade the schema; retention of the request log."""

from __future__ import annotations

import click


@click.group()
def db() -> None:
    """Database schema."""


@db.command()
@click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or sqlite:///data/quantroute.db)")
def upgrade(db_url: str | None) -> None:
    """Create or upgrade the schema to the newest revision of every branch (run once per release, before the
    other processes: they refuse a schema that is not theirs). Concurrent upgrades wait for each other."""
    from quantroute.db.engine import database_url, init_db, make_engine
    from quantroute.db.schema import db_revisions

    engine = make_engine(db_url)
    init_db(engine)
    click.echo(f"schema up to date: {database_url(db_url).split('@')[-1]} at "
               f"{', '.join(sorted(db_revisions(engine) or []))}")
    engine.dispose()


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Rollout guards (window_s), the sessions page and the what-if replay read recent raw rows; an hour is more
# than any of them looks back.
MIN_RAW_RETENTION_S = 3600


def parse_age(value: str, option: str) -> float:
    """'30d', '12h', '90m', '3600s' -> seconds; a clear error naming the option otherwise."""
    v = value.strip().lower()
    if len(v) >= 2 and v[-1] in _UNITS and v[:-1].replace(".", "", 1).isdigit():
        return float(v[:-1]) * _UNITS[v[-1]]
    raise click.BadParameter(f"{value!r} is not an age; give a number and a unit: s, m, h or d (e.g. 30d, 12h)",
                             param_hint=option)


@db.command()
@click.option("--older-than", "older_than", required=True,
              help="delete request_log rows that arrived longer ago than this (e.g. 30d; at least 1h)")
@click.option("--rollup-older-than", "rollup_older_than", default=None,
              help="also delete per-minute rollup rows older than this (must be >= --older-than); "
                   "default: keep the rollup, which the dashboard's long windows read")
@click.option("--batch", default=10_000, show_default=True, type=click.IntRange(min=1),
              help="rows per delete transaction (the router's log writer waits at most one batch)")
@click.option("--dry-run", is_flag=True, help="count what would be deleted; delete nothing")
@click.option("--by", default="retention", show_default=True, help="who prunes (the audit event's actor)")
@click.option("--db", "db_url", default=None, help="database URL (default $DATABASE_URL or sqlite:///data/quantroute.db)")
def prune(older_than: str, rollup_older_than: str | None, batch: int, dry_run: bool, by: str,
          db_url: str | None) -> None:
    """Retention: delete old request-log rows (and optionally old rollup minutes).

    The per-minute rollup keeps counts, tokens and latency sums of pruned rows, so the dashboard's long
    windows still show them; only per-request detail (guards, replay, session counts) goes."""
    from datetime import timedelta

    from quantroute.cli.database import open_engine
    from quantroute.clock import utcnow
    from quantroute.db import audit, request_log, request_stats, shadow_pair
    from quantroute.db.engine import database_url
    from quantroute.db.engine import session as db_session

    raw_s = parse_age(older_than, "--older-than")
    if raw_s < MIN_RAW_RETENTION_S:
        raise click.BadParameter(f"{older_than!r} is under 1h: rollout guards and the what-if replay read the "
                                 "last hour of requests", param_hint="--older-than")
    roll_s = parse_age(rollup_older_than, "--rollup-older-than") if rollup_older_than else None
    if roll_s is not None and roll_s < raw_s:
        raise click.BadParameter(f"{rollup_older_than!r} is shorter than --older-than {older_than!r}: the rollup "
                                 "would lose minutes whose raw rows are kept", param_hint="--rollup-older-than")
    engine = open_engine(db_url)
    now = utcnow()
    raw_cut = now - timedelta(seconds=raw_s)
    where = database_url(db_url).split("@")[-1]
    if dry_run:
        n = request_log.count_before(engine, raw_cut)
        msg = f"dry run: would delete {n} request_log row(s) before {raw_cut:%Y-%m-%d %H:%M:%S} UTC"
        if roll_s is not None:
            with engine.connect() as conn:
                counted = request_stats.count_before(conn=conn, before=now - timedelta(seconds=roll_s))
            msg += f" and {counted} rollup row(s)"
        msg += f" and {shadow_pair.count_before(engine, raw_cut)} shadow pair(s)"
        click.echo(f"{msg} ({where})")
        return
    n = request_log.prune_before(engine, raw_cut, batch=batch)
    msg = f"deleted {n} request_log row(s) before {raw_cut:%Y-%m-%d %H:%M:%S} UTC"
    m = None
    if roll_s is not None:
        with engine.begin() as conn:
            m = request_stats.prune_before(conn=conn, before=now - timedelta(seconds=roll_s))
        msg += f" and {m} rollup row(s)"
    pairs = shadow_pair.prune_before(engine, raw_cut, batch=batch)  # shadow pairs: the request log's retention
    msg += f" and {pairs} shadow pair(s)"
    with db_session(engine) as s:
        audit.record(s, actor=by, action="db.prune", subject="request_log",
                     detail={"older_than": older_than, "before": raw_cut.isoformat(), "request_log_rows": n,
                             "rollup_older_than": rollup_older_than, "rollup_rows": m,
                             "shadow_pairs": pairs})
        s.commit()
    click.echo(f"{msg} ({where})")
