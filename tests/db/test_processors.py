"""The hand-rendered statements' processors write and read exactly what SQLAlchemy's own would."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import create_engine

from quantroute.db.engine import session, table_of
from quantroute.db.processors import _sqlite_utc_value, bind_processors, result_processors
from quantroute.db.request_log import RequestLog
from quantroute.db.session_pin import _COLUMNS, PinClaims, SessionPin


def _datetimes() -> list[datetime]:
    rng = random.Random(13)
    zones = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)), timezone(timedelta(0))]
    out = [datetime(2026, 12, 1, 2, 3, 4, 0, UTC),  # no microseconds: isoformat must still write six digits
           datetime(999, 1, 2, 3, 4, 5, 6, UTC),  # a three-digit year: padded to four either way
           datetime(9999, 12, 31, 23, 59, 59, 999_999, UTC),
           datetime(2026, 3, 29, 1, 30, 0, 500_000, timezone(timedelta(hours=2)))]  # crosses a date to UTC
    for _ in range(300):
        base = datetime(rng.randint(1, 9998), rng.randint(1, 12), rng.randint(1, 28), rng.randint(0, 23),
                        rng.randint(0, 59), rng.randint(0, 59), rng.choice([0, rng.randint(0, 999_999)]),
                        rng.choice(zones))
        out.append(base)
    return out


@pytest.mark.parametrize("model, column", [(SessionPin, "created_at"), (SessionPin, "expires_at"),
                                           (RequestLog, "ts")])
def test_sqlite_timestamps_match_sqlalchemy(model, column) -> None:
    dialect = create_engine("sqlite://").dialect
    table = table_of(model)
    ours_bind, = bind_processors(table, (column,), dialect)
    ours_result, = result_processors(table, (column,), dialect)
    impl = table.c[column].type.dialect_impl(dialect)
    theirs_bind, theirs_result = impl.bind_processor(dialect), impl.result_processor(dialect, None)
    # the fast path is in use (SQLAlchemy hands out a new closure per call, so identity with theirs says nothing)
    assert ours_bind.__qualname__.startswith("_sqlite_utc_text") and ours_result is _sqlite_utc_value
    for dt in _datetimes():
        text = theirs_bind(dt)
        assert ours_bind(dt) == text, dt
        assert ours_result(text) == theirs_result(text) == dt, text
        assert ours_result(text).tzinfo is UTC
    assert ours_bind(None) is None and ours_result(None) is None
    for stored in ("2026-12-01 02:03:04", "2026-12-01 02:03:04.000100"):  # shorter texts other writers leave
        assert ours_result(stored) == theirs_result(stored)
    with pytest.raises(ValueError, match="timezone"):  # a naive datetime is refused, as the column type does
        ours_bind(datetime(2026, 12, 1))
    with pytest.raises(ValueError, match="timezone"):
        theirs_bind(datetime(2026, 12, 1))


def test_sqlite_timestamps_in_runs_within_a_second_and_past_the_kept_prefixes_match_sqlalchemy() -> None:
    """The text up to the second is kept per second: runs of timestamps within one second (microseconds 0 and
    999999 among them), the same wall time on other days, months and years (a key missing a field would reuse
    their text), and more seconds than are kept, revisited after the cache was cleared."""
    from quantroute.db.processors import PREFIXES_KEPT

    dialect = create_engine("sqlite://").dialect
    table = table_of(SessionPin)
    ours, = bind_processors(table, ("created_at",), dialect)
    theirs = table.c["created_at"].type.dialect_impl(dialect).bind_processor(dialect)
    start = datetime(2026, 12, 1, 23, 59, 58, 0, UTC)
    runs = [start + timedelta(microseconds=us) for us in (0, 1, 999_999, 1_000_000, 1_000_001, 2_999_999)]
    elsewhere = [start.replace(day=2), start.replace(month=11), start.replace(year=2025), start.replace(minute=1)]
    many = [start + timedelta(seconds=k, microseconds=k) for k in range(PREFIXES_KEPT * 2 + 3)]
    for dt in [*runs, *elsewhere, *many, *many[::-7], *runs]:
        assert ours(dt) == theirs(dt), dt


def test_other_columns_and_databases_keep_sqlalchemys_processors() -> None:
    table = table_of(SessionPin)
    for url in ("sqlite://", "postgresql+psycopg://"):
        dialect = create_engine(url).dialect
        binds, results = bind_processors(table, _COLUMNS, dialect), result_processors(table, _COLUMNS, dialect)
        for c, b, r in zip(_COLUMNS, binds, results):
            impl = table.c[c].type.dialect_impl(dialect)
            if url.startswith("sqlite") and c in ("created_at", "last_used", "expires_at"):
                continue
            assert (b is None) == (impl.bind_processor(dialect) is None), c
            assert (r is None) == (impl.result_processor(dialect, None) is None), c


def test_a_claimed_pin_reads_back_exactly_through_the_orm(engine) -> None:
    """End to end on both databases: what the claim writes, the ORM reads back unchanged (and the reverse)."""
    now = datetime(2026, 12, 1, 2, 3, 4, 0, UTC)  # microsecond 0: the form SQLAlchemy and isoformat could differ on
    pins = [{"session_key": f"s{i}", "model": "m", "tier": "int4", "arm": None, "deployment": None,
             "served_deployment": "d", "last_node": None, "policy_version": 1,
             "created_at": now + timedelta(microseconds=i), "last_used": now,
             "expires_at": now + timedelta(hours=1, microseconds=7 * i)} for i in range(3)]
    with engine.begin() as conn:
        stored = PinClaims(engine.dialect).claim(conn, pins, now)
    assert [p["created_at"] for p in stored] == [p["created_at"] for p in pins]
    with session(engine) as s:
        for p in pins:
            row = s.get(SessionPin, p["session_key"])
            assert row is not None
            assert (row.created_at.replace(tzinfo=UTC) if row.created_at.tzinfo is None else row.created_at) \
                == p["created_at"]
            assert (row.expires_at.replace(tzinfo=UTC) if row.expires_at.tzinfo is None else row.expires_at) \
                == p["expires_at"]
        s.add(SessionPin(session_key="orm", model="m", tier="int4", created_at=now, last_used=now,
                         expires_at=now + timedelta(hours=1)))
        s.commit()
    with engine.begin() as conn:  # the claim reads a pin the ORM wrote
        (orm,) = PinClaims(engine.dialect).claim(conn, [{**pins[0], "session_key": "orm"}], now)
    assert orm["created_at"] == now and orm["expires_at"] == now + timedelta(hours=1)
