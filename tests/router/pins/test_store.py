"""Session pins: one-statement read-or-create, the purge of expired pins (bounded batches, SQLite and PostgreSQL)
and the router's purge task."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy import text
from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import make_engine
from quantroute.db.engine import session as db_session
from quantroute.db.session_pin import SessionPin, claim_pins, purge_expired_pins
from tests.conftest import wait_until
from tests.router.conftest import TOLERANT, chat, router_at
from tests.support.sqlite_lock import WriteLock


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


def test_the_purge_sweeps_the_table_in_bounded_ranges_of_keys(engine):
    """Each step checks at most its window of keys and deletes the pins among them that expired before the grace;
    the sweep ends at the table's last key, and a pin refreshed since it expired is kept."""
    add_pins(engine, "old", 25, expired_s_ago=3600)
    add_pins(engine, "recent", 2, expired_s_ago=5)  # expired, but inside the grace given below
    add_pins(engine, "live", 3)
    before = utcnow() - timedelta(seconds=60)
    with engine.connect() as c:  # in the database's collation
        ordered = list(c.execute(text("SELECT session_key FROM session_pin ORDER BY session_key")).scalars())
    steps, after = [], ""
    with db_session(engine) as s:
        while True:
            n, upto = purge_expired_pins(session=s, before=before, after=after, window=10)
            steps.append((after, n, upto))
            if upto is None:
                break
            after = upto
    # 30 keys: three ranges of 10, then nothing past the last key
    assert [u for _, _, u in steps] == [ordered[9], ordered[19], ordered[29], None]
    assert [n for _, n, _ in steps] == [sum(k.startswith("old") for k in ordered[a:b])
                                        for a, b in ((0, 10), (10, 20), (20, 30), (30, 30))]
    assert keys(engine) == {"recent-0", "recent-1", "live-0", "live-1", "live-2"}


def test_claim_reads_or_creates_in_one_statement_and_replaces_only_expired_pins(engine):
    add_pins(engine, "live", 1)  # another replica's live int4 pin
    add_pins(engine, "expired", 1, expired_s_ago=3600)
    add_pins(engine, "purged", 1, expired_s_ago=3600)
    now = utcnow()
    with db_session(engine) as other:  # another replica purges this one before the claim lands
        assert purge_expired_pins(session=other, before=now - timedelta(seconds=1800), after="live-0") == (1, None)

    def row(key: str) -> dict:
        return {"session_key": key, "model": "llama3-8b", "tier": "fp16", "arm": None, "deployment": None,
                "served_deployment": "d-fp16", "last_node": "n-1", "policy_version": 2, "created_at": now,
                "last_used": now, "expires_at": now + timedelta(hours=2)}

    with engine.begin() as conn:
        got = {p["session_key"]: p for p in claim_pins(conn=conn, pins=[row(k) for k in ("new-0", "live-0",
                                                                                     "expired-0", "purged-0")],
                                                    now=now)}
    assert {k: p["tier"] for k, p in got.items()} == {"new-0": "fp16", "live-0": "int4", "expired-0": "fp16",
                                                  "purged-0": "fp16"}
    assert got["live-0"]["served_deployment"] is None and got["live-0"]["created_at"] < now  # the winner's row
    assert got["live-0"]["last_node"] is None and got["new-0"]["last_node"] == "n-1"  # its node too
    assert got["live-0"]["expires_at"] > now + timedelta(hours=1, minutes=59)  # ... refreshed by the claim
    assert got["expired-0"]["created_at"] == now and got["expired-0"]["policy_version"] == 2  # started over
    with db_session(engine) as s:
        assert {p.session_key: p.tier for p in s.exec(select(SessionPin))} == {
            "new-0": "fp16", "live-0": "int4", "expired-0": "fp16", "purged-0": "fp16"}


def test_router_purges_expired_pins_in_the_background(make_settings):
    settings = make_settings(pin_purge_interval_s=0.1, pin_purge_batch=4, pin_purge_max_batches=2,
                             pin_touch_interval_s=1.0)
    eng = make_engine(settings.db_url)
    with router_at(settings) as (url, app):
        add_pins(eng, "stale", 11, expired_s_ago=3600)
        assert chat(url, TOLERANT, session="alive").status_code == 200
        wait_until(lambda: not any(k.startswith("stale") for k in keys(eng)),
                   what=lambda: f"the stale pins purged (left: {sorted(keys(eng))})", timeout=10)
        assert keys(eng) == {"alive"}
        assert "quantroute_session_pins_purged_total 11.0" in httpx.get(url + "/metrics").text
    eng.dispose()


def test_the_log_names_each_request_s_pin_so_the_dashboard_counts_a_session_s_turns(make_settings):
    """Through a running router: every logged request of a session carries its pin's creation time as stored,
    so the sessions view counts 3 turns (2 routed by the pin) for one session and 1 for another; a request
    without a session names no pin."""
    from dashboard import queries
    from quantroute.db.request_log import RequestLog

    settings = make_settings()
    eng = make_engine(settings.db_url)
    with router_at(settings) as (url, app):
        for session in ("three", "one", "three", "three", None):
            assert chat(url, TOLERANT, session=session).status_code == 200
        wait_until(lambda: len(rows(eng)) == 5, what="5 logged requests", timeout=10)
    with db_session(eng) as s:
        pins = {p.session_key: p.created_at for p in s.exec(select(SessionPin))}
        logged = [(r.session_key, r.pin_created_at) for r in s.exec(select(RequestLog))]
    assert sorted(logged, key=str) == sorted([("three", pins["three"])] * 3 + [("one", pins["one"]), (None, None)],
                                             key=str)
    counts = queries.pinned_sessions(eng).set_index("session_key")
    assert counts.loc["three", "requests"] == 3 and counts.loc["three", "routed_by_pin"] == 2
    assert counts.loc["one", "requests"] == 1 and counts.loc["one", "routed_by_pin"] == 0
    eng.dispose()


def rows(engine) -> list:
    from quantroute.db.request_log import RequestLog

    with db_session(engine) as s:
        return list(s.exec(select(RequestLog.id)))


def _pin_row(key: str, tier: str) -> dict:
    return {"key": key, "model": "llama3-8b", "tier": tier, "arm": None, "deployment": None,
            "policy_version": 1, "ttl_s": 3600, "served_deployment": f"d-{tier}"}


def test_a_claimed_pin_is_adopted_by_whoever_reads_it_next_without_a_callback(sqlite_url):
    """Adoption is lazy (a first turn costs no callback of its own): a claim stored as sent leaves no copy of
    its row behind once read; a session another replica stored first reads as that replica's pin on its next
    lookup; a claim that failed is forgotten there, counted, and the next turn claims again."""
    import asyncio

    from quantroute.router.pins.committer import PinCommitter
    from quantroute.router.pins.store import PinStore

    async def go() -> None:
        engines = [make_engine(sqlite_url), make_engine(sqlite_url)]
        committers = [PinCommitter(e, timeout_s=0.3) for e in engines]
        runners = [asyncio.create_task(c.run()) for c in committers]
        ours, theirs = (PinStore(e, committer=c) for e, c in zip(engines, committers))
        try:
            first = theirs.claim(**_pin_row("s-taken", "fp16"))
            await first.stored
            pin = ours.claim(**_pin_row("s-taken", "int4"))  # this replica routed the first turn elsewhere
            own = ours.claim(**_pin_row("s-own", "int4"))
            await asyncio.wait([pin.stored, own.stored])
            assert pin.tier == "int4"  # resolved, but nothing applied before a read
            assert ours.get("s-taken", 3600) is pin and pin.tier == "fp16" and pin.stored is None
            assert ours.get("s-own", 3600) is own and own.tier == "int4"
            assert (own.stored, own.claim_row) == (None, None)  # no row kept for the pin's lifetime

            with WriteLock(sqlite_url.removeprefix("sqlite:///")):  # held past the claim's 0.3 s
                failed = ours.claim(**_pin_row("s-failed", "int4"))
                await asyncio.wait([failed.stored], timeout=10)
            assert failed.stored.exception() is not None and "s-failed" in ours.cache
            assert ours.get("s-failed", 3600) is None and "s-failed" not in ours.cache
            assert ours.db_errors == 1
        finally:
            for r in runners:
                r.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            for e in engines:
                e.dispose()

    asyncio.run(go())
