"""Session pins: an in-memory cache in front of the `session_pin` table.

A hit costs a dict lookup. A miss (new session, restarted router, another replica or worker pinned it) does not
read the DB first: the caller routes the request as a first turn and `claim`s a pin for that route, which the
group committer (`committer.py`) stores with one read-or-create statement, concurrently with forwarding. The
claim resolves with the pin in force: ours, or the one another replica stored first, which the request then
follows before any byte of its response leaves (`Decider.settle`). A pin that cannot be stored fails its
request: stickiness is never traded for availability. Without a database pins live in this process only.

A returning turn is a hit. At most every `REORDER_S` it moves the pin to the back of the cache (the bound evicts
the sessions idle longest), and at most every `touch_interval_s` per pin (and at least every tenth of its TTL) it
queues a touch with the committer (the stored expiry follows the session's use; a node move is written at once),
which goes out in a batch with other sessions' touches; its answer does not wait for it. A stored expiry is
written one touch interval past the TTL, so it never falls before the session's true expiry between touches:
another replica (or this one, after its cache let the pin go) finds the pin alive for at least the TTL after the
session's last turn, and for at most one touch interval more. The touch's stored row comes back: the cache takes another
replica's node move from it, and another replica's pin where the stored one had expired and was replaced.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from quantroute.clock import utcnow
from quantroute.db.engine import require_engine
from quantroute.db.engine import session as db_session
from quantroute.db.session_pin import (
    SessionPin,
    claim_row,
    delete_pin,
    list_pins,
    rearm_pin,
    set_served_deployment,
    touch_row,
)
from quantroute.router.pins.committer import PinCommitter, Touched

log = logging.getLogger(__name__)

# A hit moves its pin to the back of the cache at most this often (and at least every touch interval), so the
# bound evicts the sessions idle longest to within this, whatever the touch interval.
REORDER_S = 30.0


@dataclass(slots=True)
class Pin:
    session_key: str
    model: str
    tier: str
    arm: str | None
    deployment: str | None
    policy_version: int | None
    created_at: datetime
    expires: float  # monotonic deadline
    touched: float  # monotonic time the stored expiry was last refreshed (queued)
    served_deployment: str | None = None  # preferred within the tier (see SessionPin)
    node: str | None = None  # the node that served the last turn (SessionPin.last_node; node affinity)
    # Set while the claim that created this pin is being committed: resolves with the pin in force or fails
    # (PinNotStored). None once adopted (or without a DB).
    stored: asyncio.Future | None = None
    # The row this process claimed, until adopted: the committer resolves a claim stored as sent with this very
    # dict, so `stored.result() is claim_row` says "ours, unchanged" without comparing a field (see adopt)
    claim_row: dict | None = None
    node_unsaved: bool = False  # this replica moved the session's node and no touch has taken the move yet
    ttl_s: float = 0.0  # the TTL of the last turn's lookup (a node move's touch refreshes with it)
    moved: float = 0.0  # monotonic time the pin last went to the back of the cache

    @classmethod
    def from_row(cls, row: SessionPin) -> Pin:
        now_m, now = time.monotonic(), utcnow()
        return cls(row.session_key, row.model, row.tier, row.arm, row.deployment, row.policy_version,
                   row.created_at, now_m + (row.expires_at - now).total_seconds(), now_m, row.served_deployment,
                   row.last_node, moved=now_m)

    def view(self) -> dict:
        return {"session_key": self.session_key, "model": self.model, "tier": self.tier, "arm": self.arm,
                "deployment": self.deployment, "served_deployment": self.served_deployment,
                "last_node": self.node, "policy_version": self.policy_version,
                "created_at": self.created_at.isoformat(),
                "expires_in_s": round(self.expires - time.monotonic(), 1)}


class PinStore:
    def __init__(self, engine: Engine | None, *, touch_interval_s: float = 300.0,
                 committer: PinCommitter | None = None, max_cached: int = 200_000) -> None:
        self.engine = engine
        self.committer = committer
        self.touch_interval_s = touch_interval_s
        self.max_cached = max_cached
        if engine is not None and committer is None:
            raise ValueError("a pin store with a database needs its committer (touches and purges go through it)")
        self.cache: dict[str, Pin] = {}
        self.db_errors = 0
        self._purge_after = ""  # the purge's sweep goes on past this key
        self._bg: set[asyncio.Task] = set()
        if committer is not None:
            committer.on_touched = self._touched

    def interval(self, ttl_s: float) -> float:
        """How long a pin's stored expiry may go unrefreshed: `touch_interval_s`, or a tenth of a short TTL (whose
        sessions would otherwise outlive it by a whole touch interval)."""
        return min(self.touch_interval_s, ttl_s * 0.1)

    def get(self, key: str, ttl_s: int) -> Pin | None:
        """The cached pin (also one whose claim is still being committed here); None on a miss, which the caller
        answers with `claim`: that one statement reads the pin another replica may hold and creates ours."""
        now = time.monotonic()
        pin = self.cache.get(key)
        if pin is None:
            return None
        if pin.stored is not None and not self.adopt(pin):
            return None  # its claim failed: this turn claims again
        if pin.expires > now:
            pin.expires = now + ttl_s
            pin.ttl_s = ttl_s
            interval = self.interval(ttl_s)
            if now - pin.moved > min(interval, REORDER_S):
                # To the back: the bound evicts the sessions idle longest, not the ones that started first (a
                # chat that outlives the cache's turnover would miss and claim again on every later turn)
                del self.cache[key]
                self.cache[key] = pin
                pin.moved = now
                if self.committer is not None and pin.stored is None and now - pin.touched > interval:
                    self._touch(pin, ttl_s, now)
            return pin
        del self.cache[key]
        return None

    def claim(self, *, key: str, model: str, tier: str, arm: str | None, deployment: str | None,
              policy_version: int | None, ttl_s: int, served_deployment: str | None = None,
              node: str | None = None) -> Pin:
        """Pin `key` to this route, in the cache at once and in the DB through the group committer. Until the
        commit resolves, `pin.stored` is pending; then the pin holds the values in force (another replica's, if
        it stored the session first)."""
        now, now_m = utcnow(), time.monotonic()
        pin = Pin(key, model, tier, arm, deployment, policy_version, now, now_m + ttl_s, now_m, served_deployment,
                  node, ttl_s=ttl_s, moved=now_m)
        self.cache[key] = pin
        # Bounded: clients choose session ids. The oldest entries go; with a DB their next turns claim again and
        # get the stored pins back; without one they are lost, so size the bound for the sessions alive in a TTL.
        if len(self.cache) > self.max_cached:
            self._evict()
        if self.committer is None:
            return pin
        pin.claim_row = claim_row(key, model, tier, arm, deployment, served_deployment, node, policy_version, now,
                                  ttl_s + self.interval(ttl_s))
        pin.stored = self.committer.submit(pin.claim_row)
        return pin

    def adopt(self, pin: Pin) -> bool:
        """Once its claim resolved: take the stored values (another replica's, if it stored the session first),
        or forget a pin that was never stored (False). Idempotent, and lazy: whoever reads the pin first applies
        it (the request that claimed it, before answering; a later turn, through `get`), so a first turn costs
        no callback of its own."""
        fut = pin.stored
        if fut is None or not fut.done():
            return True
        if fut.cancelled() or fut.exception() is not None:
            if self.cache.get(pin.session_key) is pin:  # the next request claims again; this one fails (settle)
                del self.cache[pin.session_key]
                self.db_errors += 1
            return False
        row: dict = fut.result()
        if row is pin.claim_row:  # stored as claimed, nearly every first turn: the pin already holds it
            pin.stored = pin.claim_row = None
            return True
        if row["model"] == pin.model:  # a key reused for another model is that model's pin, not ours to follow
            pin.tier, pin.arm, pin.deployment = row["tier"], row["arm"], row["deployment"]
            pin.served_deployment, pin.policy_version, pin.created_at = (row["served_deployment"],
                                                                         row["policy_version"], row["created_at"])
            pin.node = row["last_node"]
        pin.stored = pin.claim_row = None
        return True

    async def delete(self, key: str) -> bool:
        found = self.cache.pop(key, None) is not None
        if self.engine is not None:
            found = await asyncio.to_thread(self._delete, key) or found
        return found

    def forget(self, key: str) -> bool:
        """Drop the cached pin only: another worker of this router deleted the row (its unpin)."""
        return self.cache.pop(key, None) is not None

    async def list(self) -> list[dict]:
        if self.engine is None:
            return [p.view() for p in self.cache.values() if p.expires > time.monotonic()]
        rows = await asyncio.to_thread(self._list)
        return [Pin.from_row(r).view() for r in rows]

    def set_served(self, key: str, deployment: str) -> None:
        """Record the deployment a pinned session now stays on: in the cache at once, in the DB off the path."""
        pin = self.cache.get(key)
        if pin is not None:
            pin.served_deployment = deployment
        if self.engine is not None:
            self._spawn(self._set_served(key, deployment))

    def set_node(self, key: str, node: str) -> None:
        """Record the node that served a pinned session's turn, when it changed: in the cache at once, in the DB
        off the path (with affinity on it changes only when a turn falls back, so this write is rare)."""
        pin = self.cache.get(key)
        if pin is None or pin.node == node:
            return
        pin.node = node
        if self.committer is not None and pin.stored is None:
            pin.node_unsaved = True
            self._touch(pin, pin.ttl_s, time.monotonic())

    def _touch(self, pin: Pin, ttl_s: float, now: float) -> None:
        """Queue the pin's refresh (and its node, if this replica moved it). Refused at the queue's bound: the pin
        stays due and its next turn offers it again (see committer.Touches)."""
        row = touch_row(pin.session_key, pin.model, pin.tier, pin.arm, pin.deployment, pin.served_deployment,
                        pin.node if pin.node_unsaved else None, pin.policy_version, pin.created_at, utcnow(),
                        ttl_s + self.interval(ttl_s))
        if self.committer is not None and self.committer.touch(row):
            pin.touched = now
            pin.node_unsaved = False

    def _touched(self, touched: builtins.list[Touched]) -> None:
        """A touch batch was written. The cache follows another replica's node move (node affinity across
        replicas); where the stored pin is another one (ours had expired there and another replica pinned the
        session afresh) it takes that pin, or forgets ours so that the next turn claims and follows the stored
        one. Not for a key with a newer touch queued, whose outcome comes with it."""
        queued = self.committer.touches.rows if self.committer is not None else {}
        for t in touched:
            pin = self.cache.get(t.session_key)
            if pin is None or pin.stored is not None or t.session_key in queued:
                continue
            if t.created_at == pin.created_at:
                if t.last_node is not None:
                    pin.node = t.last_node
            elif t.row is not None and t.row["model"] == pin.model:
                row = t.row
                pin.tier, pin.arm, pin.deployment = row["tier"], row["arm"], row["deployment"]
                pin.served_deployment, pin.policy_version = row["served_deployment"], row["policy_version"]
                pin.created_at, pin.node = row["created_at"], row["last_node"]
            else:
                del self.cache[t.session_key]

    def rearm(self, key: str, arm: str) -> None:
        """Move a pinned session to another canary arm (same tier): in the cache at once, in the DB off the path."""
        pin = self.cache.get(key)
        if pin is not None:
            pin.arm, pin.served_deployment = arm, None
        if self.engine is not None:
            self._spawn(self._db_call(rearm_pin, session_key=key, arm=arm))

    async def _db_call(self, fn, **kw) -> None:
        def run() -> None:
            with db_session(self._engine()) as s:
                fn(session=s, **kw)
        try:
            await asyncio.to_thread(run)
        except Exception as e:  # noqa: BLE001 - the DB being down never fails a request
            self.db_errors += 1
            log.warning("session pin update failed: %s", e)

    def _evict(self) -> None:
        """Drop the hundredth of the bound at the front at once: the pins idle longest, to within the touch interval
        (see `get`). One at a time, each eviction cost a scan from the
        dict's start over the slots earlier evictions left empty (CPython compacts a dict only when it grows):
        ~0.7 ms a first turn at 200,000 cached pins, against ~1 us amortized this way."""
        for key in list(itertools.islice(self.cache, len(self.cache) - self.max_cached + self.max_cached // 100)):
            del self.cache[key]

    async def forget_expired(self, chunk: int = 5000) -> None:
        """Drop the cached pins that expired, `chunk` at a time with the loop free between chunks: a cache of
        200,000 pins checked in one go held the event loop for tens of milliseconds at every purge."""
        keys = list(self.cache)
        for i in range(0, len(keys), chunk):
            now = time.monotonic()
            for k in keys[i:i + chunk]:
                p = self.cache.get(k)
                if p is not None and p.expires <= now:
                    del self.cache[k]
            await asyncio.sleep(0)

    async def purge_expired(self, *, batch: int, max_batches: int, grace_s: float) -> int:
        """Delete pins that expired more than `grace_s` ago: the sweep goes on from where the last call stopped,
        `batch` keys per step, at most `max_batches` steps per call, and ends a call early once it reached the end of
        the table (the next call starts over from the first key). The grace covers a replica whose cache kept a
        session alive but has not refreshed the row yet (it does so every `touch_interval_s`)."""
        await self.forget_expired()
        if self.committer is None:
            return 0
        before = utcnow() - timedelta(seconds=grace_s)
        total = 0
        for _ in range(max_batches):
            # In the committer's turn on its connection: on SQLite a purge in a thread held the write lock while
            # claims waited for it
            n, upto = await self.committer.purge(before, self._purge_after, batch)
            total += n
            self._purge_after = upto or ""
            if upto is None:
                break
        return total

    async def purge_loop(self, *, interval_s: float, batch: int, max_batches: int, on_purged=None) -> None:
        """Every `interval_s`: purge expired pins. Several replicas may run it at once; deletes are idempotent."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                n = await self.purge_expired(batch=batch, max_batches=max_batches, grace_s=self.touch_interval_s)
            except Exception as e:  # noqa: BLE001 - DB down: try again next time
                self.db_errors += 1
                log.warning("session pin purge failed: %s", e)
                continue
            if n and on_purged is not None:
                on_purged(n)

    # -- DB side (worker threads) -------------------------------------------------------------------------
    def _engine(self) -> Engine:
        return require_engine(self.engine, who="the session pin store")

    def _delete(self, key: str) -> bool:
        with db_session(self._engine()) as s:
            return delete_pin(session=s, session_key=key)

    def _list(self) -> builtins.list[SessionPin]:  # `list` here is the method above
        with db_session(self._engine()) as s:
            return list_pins(session=s)

    async def _set_served(self, key: str, deployment: str) -> None:
        try:
            await asyncio.to_thread(self._set_served_sync, key, deployment)
        except Exception as e:  # noqa: BLE001 - DB down: the in-memory pin still holds
            self.db_errors += 1
            log.warning("session pin deployment update failed: %s", e)

    def _set_served_sync(self, key: str, deployment: str) -> None:
        with db_session(self._engine()) as s:
            set_served_deployment(session=s, session_key=key, deployment=deployment)

    def _spawn(self, coro) -> None:
        t = asyncio.ensure_future(coro)
        self._bg.add(t)
        t.add_done_callback(self._bg.discard)
