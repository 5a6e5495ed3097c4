"""What a returning turn's pin refresh costs the database, with and without an index on the pin's expiry.

Each arm builds the shipped schema (the migrations) in a fresh database, fills `session_pin` with `--fill` pins
with random keys (as clients choose session ids), then refreshes `--batches` batches of `--batch` pins drawn at
random, with the router's own statement (`PinClaims.refresh_sql`), as the pin committer writes returning turns'
refreshes. `indexed` adds back an index on `expires_at` (on PostgreSQL with the default fillfactor); `unindexed`
is the table as shipped. The arms alternate over `--rounds`; each figure is the median with its range.

- SQLite: CPU time per refreshed pin (SQLite runs in this process, as it does in the router), with a passive WAL
  checkpoint every 5 batches included: copying the pages a refresh dirtied into the database is the request log
  writer's work in the router, on the same CPU.
- PostgreSQL: WAL bytes per refreshed pin (exact, the server's count), wall time per pin on one connection (the
  server's work plus a round trip per batch) and the share of heap-only (HOT) updates. A checkpoint precedes
  the refreshes, so the first change to each page after it writes the whole page, as in a running database.

    python benchmarks/pin_refresh.py --db sqlite --db postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text

from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.db.session_pin import PinClaims, claim_row

ARMS = ("indexed", "unindexed")
CHECKPOINT_EVERY = 5  # SQLite: batches between passive checkpoints


def fresh_url(db: str, tmp: Path, n: int) -> tuple[str, str | None]:
    """(URL of a fresh database, the PostgreSQL schema to drop afterwards)."""
    if db == "sqlite":
        return f"sqlite:///{tmp / f'pins-{n}.db'}", None
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = make_engine(db)
    with admin.begin() as c:
        c.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    sep = "&" if "?" in db else "?"
    return f"{db}{sep}options=-csearch_path%3D{schema}", schema


def drop_schema(db: str, schema: str | None) -> None:
    if schema is None:
        return
    admin = make_engine(db)
    with admin.begin() as c:
        c.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def one_arm(url: str, arm: str, *, fill: int, batches: int, batch: int, seed: int) -> dict[str, float]:
    engine = make_engine(url)
    init_db(engine)
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as c:
        if arm == "indexed":
            c.execute(text("CREATE INDEX ix_session_pin_expires_at ON session_pin (expires_at)"))
            if pg:
                c.execute(text("ALTER TABLE session_pin RESET (fillfactor)"))
    claims = PinClaims(engine.dialect)
    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        if pg:
            conn.autocommit = True
        else:
            conn.isolation_level = None  # autocommit, as the router's pin connection
            conn.execute("PRAGMA wal_autocheckpoint=0")
        now = utcnow()
        keys: list[str] = []
        for start in range(0, fill, 500):
            rows = [claim_row(uuid.uuid4().hex, "m", "int4", None, None, "d-int4", "n-1", 1, now, 3600)
                    for _ in range(min(500, fill - start))]
            keys += [r["session_key"] for r in rows]
            sql, params, _ = claims.statement(rows, now)
            conn.execute(sql, params).fetchall()
        rng = random.Random(seed)
        draws = [rng.sample(keys, batch) for _ in range(batches)]
        if pg:
            conn.execute("CHECKPOINT")
            lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        else:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cpu, wall = time.process_time(), time.perf_counter()
        for i, picked in enumerate(draws):
            used = now + timedelta(seconds=i + 1)
            conn.execute(claims.refresh_sql, claims.refresh_params(picked, used, used + timedelta(hours=1))).fetchall()
            if not pg and i % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        if not pg:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        n = batches * batch
        out = {"cpu_us": cpu / n * 1e6, "wall_us": wall / n * 1e6}
        if pg:
            out["wal_b"] = float(conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn,))
                                 .fetchone()[0]) / n
            conn.execute("SELECT pg_stat_force_next_flush()")
            upd, hot = conn.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                                    "WHERE relname = 'session_pin' AND schemaname = current_schema()").fetchone()
            out["hot"] = hot / upd if upd else 0.0
        return out
    finally:
        raw.close()
        engine.dispose()


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", action="append", help="'sqlite' or a PostgreSQL URL; repeat [sqlite]")
    ap.add_argument("--fill", type=int, default=200_000, help="pins in the table [200000]")
    ap.add_argument("--batches", type=int, default=300, help="refresh statements per arm and round [300]")
    ap.add_argument("--batch", type=int, default=100, help="pins a refresh statement moves [100]")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the arms alternating [3]")
    args = ap.parse_args()
    for name in ("fill", "batches", "batch", "rounds"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be 1 or more, got {getattr(args, name)}")
    if args.batch > args.fill:
        ap.error(f"--batch ({args.batch}) must not exceed --fill ({args.fill}): a batch draws distinct pins")
    dbs = args.db or ["sqlite"]
    print(f"{args.fill:,} pins with random keys; {args.batches} refreshes of {args.batch} random pins per arm and "
          f"round; {args.rounds} round(s), arms alternating; median (range)", flush=True)
    with tempfile.TemporaryDirectory(prefix="qr-pin-refresh-") as tmp:
        for db in dbs:
            kind = "sqlite" if db == "sqlite" else "postgres"
            got: dict[str, list[dict[str, float]]] = {a: [] for a in ARMS}
            for r in range(args.rounds):
                for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
                    url, schema = fresh_url(db, Path(tmp), len(got[arm]) * 2 + ARMS.index(arm))
                    try:
                        got[arm].append(one_arm(url, arm, fill=args.fill, batches=args.batches, batch=args.batch,
                                                seed=r))
                    finally:
                        drop_schema(db, schema)
            for arm in ARMS:
                rows = got[arm]
                if kind == "sqlite":
                    line = f"CPU {spread([x['cpu_us'] for x in rows], '.1f')} us a pin"
                else:
                    line = (f"WAL {spread([x['wal_b'] for x in rows], '.0f')} B a pin, "
                            f"wall {spread([x['wall_us'] for x in rows], '.1f')} us a pin, "
                            f"heap-only updates {spread([100 * x['hot'] for x in rows], '.0f')} %")
                print(f"{kind:9s}{arm:10s} {line}", flush=True)
            key = "cpu_us" if kind == "sqlite" else "wal_b"
            ratios = [u[key] / i[key] for u, i in zip(got["unindexed"], got["indexed"])]
            print(f"{kind:9s}unindexed / indexed, paired by round ({'CPU' if kind == 'sqlite' else 'WAL'}): "
                  f"{spread(ratios, '.2f')}", flush=True)


if __name__ == "__main__":
    main()
