"""Session pins: the purge of expired pins (bounded batches, SQLite and PostgreSQL) and the router's purge task."""

from __future__ import annotations

import time
import warnings
from datetime import timedelta

import httpx
from sqlmodel import select

from quantroute.db.audit import utcnow
from quantroute.db.engine import make_engine, session as db_session
from quantroute.db.session_pin import SessionPin, create_pin, purge_expired_pins, touch_pin
from tests.router.conftest import TOLERANT, chat, router_at


def add_pins(engine, prefix: str, n: int, *, expired_s_ago: float | None = None) -> None:
    now = utcnow()
    expires = now - timedelta(seconds=expired_s_ago) if expired_s_ago is not None else now + timedelta(hours=1)
    with db_session(engine) as s:
        for i in range(n):
            s.add(SessionPin(session_key=f"{prefix}-{i}", model="llama3-8b", tier="int4", created_at=now,
                             last_used=now, expires_at=expires))
        s.commit()


def keys(engine) -> set[str]:
    with db_session(engine) as s:
        return set(s.exec(select(SessionPin.session_key)))


def test_purge_deletes_expired_pins_in_bounded_batches(engine):
    add_pins(engine, "old", 25, expired_s_ago=3600)
    add_pins(engine, "recent", 2, expired_s_ago=5)  # expired, but inside the grace given below
    add_pins(engine, "live", 3)
    before = utcnow() - timedelta(seconds=60)
    counts = []
    with db_session(engine) as s:
        while True:
            counts.append(purge_expired_pins(session=s, before=before, batch=10))
            if counts[-1] < 10:
                break
    assert counts == [10, 10, 5]
    assert keys(engine) == {"recent-0", "recent-1", "live-0", "live-1", "live-2"}


def test_create_pin_over_an_expired_row_that_another_replica_purged_or_refreshed(engine):
    add_pins(engine, "purged", 1, expired_s_ago=3600)
    add_pins(engine, "touched", 1, expired_s_ago=3600)
    now = utcnow()

    def new_pin(key: str) -> SessionPin:
        return SessionPin(session_key=key, model="llama3-8b", tier="fp16", created_at=now, last_used=now,
                          expires_at=now + timedelta(hours=1))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SQLAlchemy only warns when an ORM delete matched no row
        with db_session(engine) as s:
            assert s.get(SessionPin, "purged-0") is not None  # loaded here, then another replica purges it
            with db_session(engine) as other:
                assert purge_expired_pins(session=other, before=now, batch=1) == 1
            assert create_pin(session=s, pin=new_pin("purged-0")).tier == "fp16"
        with db_session(engine) as s:
            assert s.get(SessionPin, "touched-0") is not None  # loaded here, then another replica revives it
            with db_session(engine) as other:
                touch_pin(session=other, session_key="touched-0", ttl_s=3600)
            assert create_pin(session=s, pin=new_pin("touched-0")).tier == "int4"  # the revived pin wins
    with db_session(engine) as s:
        assert s.get(SessionPin, "purged-0").tier == "fp16"
        assert s.get(SessionPin, "touched-0").tier == "int4"


def test_router_purges_expired_pins_in_the_background(make_settings):
    settings = make_settings(pin_purge_interval_s=0.1, pin_purge_batch=4, pin_purge_max_batches=2,
                             pin_touch_interval_s=1.0)
    eng = make_engine(settings.db_url)
    with router_at(settings) as (url, app):
        add_pins(eng, "stale", 11, expired_s_ago=3600)
        assert chat(url, TOLERANT, session="alive").status_code == 200
        deadline = time.monotonic() + 10
        while any(k.startswith("stale") for k in keys(eng)):
            assert time.monotonic() < deadline, f"left: {sorted(keys(eng))}"
            time.sleep(0.05)
        assert keys(eng) == {"alive"}
        assert "quantroute_session_pins_purged_total 11.0" in httpx.get(url + "/metrics").text
    eng.dispose()
