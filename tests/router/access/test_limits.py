"""The key table's decisions without a server: token buckets refill at their rate, a tenant's limits are shared
by its keys, low priorities are shed first when a replica is busy, and a revoked key is refused without asking
the database again, and a key already seen is not hashed again."""

from __future__ import annotations

import asyncio
import time

import pytest

from quantroute.router.access import keys as keys_module
from quantroute.router.access.keys import KeyTable
from quantroute.router.access.limits import Bucket, retry_after
from quantroute.router.errors import Overloaded, RateLimited, Unauthorized
from quantroute.tenants import create_key, revoke_key, set_tenant
from tests.conftest import add_users


def test_a_bucket_lets_a_burst_through_then_refills_at_its_rate():
    b = Bucket(60, now=0.0)  # 60 a minute: one a second
    for _ in range(60):
        assert b.wait_s(0.0, 1) == 0
        b.take(1)
    assert b.wait_s(0.0, 1) == pytest.approx(1.0)
    assert b.wait_s(0.5, 1) == pytest.approx(0.5)
    assert b.wait_s(1.0, 1) == 0
    b.take(100)  # tokens charged after the answer may overdraw it
    assert b.wait_s(1.0, 1) == pytest.approx(100.0)
    assert b.wait_s(10_000.0, 1) == 0 and b.level == 60  # never above its size
    assert retry_after(0.01) == 1 and retry_after(2.2) == 3


def check(table: KeyTable, key: str, active: int = 0, limit: int = 100):
    return asyncio.run(table.check({"authorization": f"Bearer {key}"}, active, limit))


def test_limits_priority_and_revocation_in_the_table(engine):
    add_users(engine, olga="operator")
    set_tenant(engine, actor="olga", name="acme", rpm=3, priority=1)
    a = create_key(engine, actor="olga", tenant="acme").key
    b = create_key(engine, actor="olga", tenant="acme", rpm=1).key
    table = KeyTable(engine, required=True)
    table.refresh()
    assert check(table, b).tenant == "acme"
    with pytest.raises(RateLimited, match="key qk_"):  # its own limit: 1 a minute
        check(table, b)
    assert check(table, a) and check(table, a)
    with pytest.raises(RateLimited, match="tenant acme") as e:  # the tenant's 3, shared by both keys
        check(table, a)
    assert int(e.value.headers["Retry-After"]) >= 1 and e.value.status == 429
    set_tenant(engine, actor="olga", name="acme", rpm=3)  # same limit: the bucket keeps its state on reload
    table.refresh()
    with pytest.raises(RateLimited):
        check(table, a)
    set_tenant(engine, actor="olga", name="acme", clear_limits=True)
    table.refresh()
    assert check(table, a)
    # priority 1 may use 55 % of the replica's limit: at 60 of 100 in progress it is shed, at 50 it is not
    with pytest.raises(Overloaded):
        check(table, a, active=60)
    assert check(table, a, active=50)
    revoke_key(engine, actor="olga", prefix=a[:11])
    table.refresh()
    reads = []
    table.refresh = lambda: reads.append(1)  # type: ignore[method-assign]  # count the reads
    with pytest.raises(Unauthorized):  # known as revoked: refused without reading the database again
        check(table, a)
    assert reads == []
    with pytest.raises(Unauthorized):  # an unknown key does read it (once), in case it was just created
        check(table, "qk_" + "z" * 43)
    assert reads == [1]
    with pytest.raises(Unauthorized, match="this router requires an API key"):
        asyncio.run(table.check({}, 0, 100))


def test_a_known_key_is_looked_up_once_and_still_expires_and_revokes(engine, monkeypatch):
    add_users(engine, olga="operator")
    key = create_key(engine, actor="olga", tenant="acme").key
    table = KeyTable(engine, required=True)
    table.refresh()
    hashed = []
    real_hash = keys_module.key_hash
    with monkeypatch.context() as patch:
        patch.setattr(keys_module, "key_hash", lambda k: hashed.append(k) or real_hash(k))
        for _ in range(3):
            assert check(table, key).tenant == "acme"
    assert hashed == [key]  # hashed on first sight only
    grant = table.grants[real_hash(key)]
    grant.expires = time.time() - 1  # expiry is checked on every request, remembered key or not
    with pytest.raises(Unauthorized, match="expired"):
        check(table, key)
    grant.expires = None
    revoke_key(engine, actor="olga", prefix=key[:11])
    table.refresh()  # a new table generation forgets every remembered key
    with pytest.raises(Unauthorized):
        check(table, key)
