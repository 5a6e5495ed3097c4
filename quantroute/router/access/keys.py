"""Client API keys at the router: `Authorization: Bearer qk_...` looked up in memory by its SHA-256, with the
tenant's tier floor, priority and rate limits attached.

The table is read from the database at start and again whenever a key or tenant row changed (a cheap poll
every `refresh_s`), so a revocation reaches every replica and worker within about that interval. A key this
replica does not know yet (created a moment ago) triggers one refresh at most every `MISS_REFRESH_S` before it
is refused, so a flood of made-up keys costs the database two small queries a second, not one a request.
Nothing of a presented key is logged or stored: errors never quote it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from quantroute.clock import aware
from quantroute.db.engine import session as open_session
from quantroute.db.tenant import ClientKey, Tenant, revision
from quantroute.router.access.limits import Bucket, retry_after
from quantroute.router.errors import Overloaded, RateLimited, Unauthorized
from quantroute.tenants import KEY_PREFIX, key_hash
from quantroute.tiers import Tier

log = logging.getLogger(__name__)

MISS_REFRESH_S = 0.5
BEARER = "bearer "
MAX_KEY_CHARS = 128
MAX_CACHED = 10_000  # Authorization values remembered per table generation (more: the cache starts over)
# Under load a replica admits a tenant's request while its completions in progress are below this share of
# max_concurrent_requests: priority 10 may use all of it, 5 three quarters, 1 ~55 %; lower priorities are shed
# first, with the same 503 and Retry-After as a replica at its limit.
PRIORITY_BASE, PRIORITY_STEP = 0.5, 0.05


class Grant:
    """What one key may do: its tenant, the stricter of its own and its tenant's floor, priority and buckets."""

    __slots__ = ("tenant", "prefix", "floor", "priority", "expires", "requests", "tokens", "session_prefix",
                 "admit_share")

    def __init__(self, tenant: str, prefix: str, floor: Tier | None, priority: int, expires: float | None,
                 requests: tuple[tuple[str, Bucket], ...], tokens: tuple[tuple[str, Bucket], ...]) -> None:
        self.tenant = tenant
        self.prefix = prefix
        self.floor = floor
        self.priority = priority
        self.expires = expires  # epoch seconds; None = until revoked
        self.requests = requests  # (whose limit, bucket): the key's and the tenant's requests per minute
        self.tokens = tokens  # the same for tokens per minute
        # Session pins are per tenant and floor: another tenant's pin is never followed, and a raised floor
        # starts the tenant's sessions again at or above it rather than following pins made below it.
        self.session_prefix = f"{tenant}/{floor.value if floor else 'any'}/"
        self.admit_share = min(1.0, PRIORITY_BASE + PRIORITY_STEP * priority)

    def spend(self, tokens: int) -> None:
        """Charge a finished request's prompt and completion tokens to the token buckets."""
        for _, b in self.tokens:
            b.take(tokens)


def _stricter(a: Tier | None, b: Tier | None) -> Tier | None:
    if a is None or b is None:
        return a or b
    return a if a.rank < b.rank else b


class Unknown:
    """check_known's answer for a key neither table holds: a refresh may know it."""


UNKNOWN = Unknown()


class KeyTable:
    def __init__(self, engine: Engine | None, *, required: bool, refresh_s: float = 2.0,
                 retry_after_s: int = 1) -> None:
        self.engine = engine
        self.retry_after_s = retry_after_s
        self.required = required  # client_auth: required (a request without a key is refused) or optional
        self.refresh_s = refresh_s
        # The grants (sha256 hex -> grant) and, for them, the Authorization values already hashed: a returning key
        # costs one dict lookup, not a SHA-256. Swapped as one object by refresh() (a worker thread), so a value is
        # never cached against a table it was not found in.
        self._generation: tuple[dict[str, Grant], dict[str, Grant]] = ({}, {})
        self.revoked: set[str] = set()  # hashes of revoked keys: refused without asking the database again
        self._buckets: dict[tuple[str, str, int], Bucket] = {}  # (scope, kind, limit): kept across refreshes
        self._revision: int | None = None
        self._last_refresh = 0.0
        self._refreshing: asyncio.Future | None = None

    @property
    def grants(self) -> dict[str, Grant]:
        return self._generation[0]

    # -- the request path ----------------------------------------------------------------------------------
    async def check(self, headers: Mapping[str, str], active: int, limit: int) -> Grant | None:
        """The grant of the request's key; None for a request without one when keys are optional. Raises 401
        (missing, malformed, unknown, revoked, expired), 503 (its priority is shed) or 429 (over a limit)."""
        grant = self.check_known(headers, active, limit)
        return await self.check_after_refresh(headers, active, limit) if isinstance(grant, Unknown) else grant

    async def check_after_refresh(self, headers: Mapping[str, str], active: int, limit: int) -> Grant | None:
        """check() for a key check_known did not know: the table is read again once, then the key is judged
        against it (still unknown: 401)."""
        await self.refresh_on_miss()
        grant = self.check_known(headers, active, limit, refreshed=True)
        if isinstance(grant, Unknown):  # not answered with refreshed=True; for the type checker
            raise Unauthorized("invalid API key: unknown, revoked or expired")
        return grant

    def check_known(self, headers: Mapping[str, str], active: int, limit: int, *,
                    refreshed: bool = False) -> Grant | None | Unknown:
        """check() without waiting for the database: UNKNOWN for a key in neither table (unless `refreshed`,
        when it is refused), so that the request path awaits nothing for a key it knows."""
        auth = headers.get("authorization")
        if not auth:
            if self.required:
                raise Unauthorized("this router requires an API key: send 'Authorization: Bearer qk_...' "
                                   "(an operator creates one with `quantroute key create`)")
            return None
        grants, cache = self._generation
        grant = cache.get(auth)
        if grant is None:
            if auth[:7].lower() != BEARER or not auth[7:].startswith(KEY_PREFIX) or len(auth) > 7 + MAX_KEY_CHARS:
                raise Unauthorized("malformed API key: expected 'Authorization: Bearer qk_...'")
            digest = key_hash(auth[7:].strip())
            grant = grants.get(digest)
            if grant is None:
                if refreshed or digest in self.revoked:
                    raise Unauthorized("invalid API key: unknown, revoked or expired")
                return UNKNOWN
            if len(cache) >= MAX_CACHED:
                cache.clear()
            cache[auth] = grant
        if grant.expires is not None and time.time() >= grant.expires:
            raise Unauthorized("invalid API key: unknown, revoked or expired")
        if active > limit * grant.admit_share:
            raise Overloaded(f"this router replica is busy; requests of priority {grant.priority} wait for room "
                             "(retry after the Retry-After delay)", headers={"Retry-After": str(self.retry_after_s)})
        if grant.requests or grant.tokens:
            self._admit(grant, time.monotonic())
        return grant

    def _admit(self, grant: Grant, now: float) -> None:
        for whose, b in grant.requests:
            wait = b.wait_s(now, 1.0)
            if wait:
                raise RateLimited(f"rate limit reached for {whose} on requests per minute (RPM): limit "
                                  f"{b.per_minute}; retry in {retry_after(wait)}s", kind="requests",
                                  retry_after_s=retry_after(wait))
        for whose, b in grant.tokens:
            wait = b.wait_s(now, 1.0)
            if wait:
                raise RateLimited(f"rate limit reached for {whose} on tokens per minute (TPM): limit "
                                  f"{b.per_minute}; retry in {retry_after(wait)}s", kind="tokens",
                                  retry_after_s=retry_after(wait))
        for _, b in grant.requests:
            b.take(1.0)

    # -- keeping the table current ------------------------------------------------------------------------
    async def refresh_on_miss(self) -> None:
        """One refresh for all the requests that missed meanwhile, at most every MISS_REFRESH_S (a miss right
        after a refresh waits for the interval to pass, so a key created just after it is still found)."""
        if self.engine is None:
            return
        if self._refreshing is None:
            wait = MISS_REFRESH_S - (time.monotonic() - self._last_refresh)
            self._refreshing = asyncio.ensure_future(self._refresh_after(max(0.0, wait)))
        refreshing = self._refreshing
        try:
            await asyncio.shield(refreshing)
        except Exception:  # the database is unreachable: the key stays unknown (401), logged
            log.warning("client keys could not be read from the database", exc_info=True)

    async def _refresh_after(self, wait_s: float) -> None:
        try:
            if wait_s:
                await asyncio.sleep(wait_s)
            await asyncio.to_thread(self.refresh)
        finally:
            self._refreshing = None

    async def run(self) -> None:
        """Poll for changes every refresh_s; reload when a key or tenant changed."""
        while True:
            await asyncio.sleep(self.refresh_s)
            await asyncio.to_thread(self.refresh_if_changed)

    def refresh_if_changed(self) -> bool:
        if self.engine is None:
            return False
        with open_session(self.engine) as s:
            seen = revision(session=s)
        if seen == self._revision:
            return False
        self.refresh()
        return True

    def refresh(self) -> None:
        """Read every key and tenant (in a worker thread) and swap the table in one assignment."""
        if self.engine is None:
            return
        self._last_refresh = time.monotonic()
        with open_session(self.engine) as s:
            seen = revision(session=s)  # read first: a change after it is read again on the next poll
            tenants = {t.name: t for t in s.exec(select(Tenant))}
            rows = list(s.exec(select(ClientKey).order_by(col(ClientKey.id))))
        now = time.monotonic()
        buckets: dict[tuple[str, str, int], Bucket] = {}

        def bucket(scope: str, kind: str, per_minute: int | None) -> tuple[tuple[str, Bucket], ...]:
            if per_minute is None:
                return ()
            k = (scope, kind, per_minute)
            b = buckets.get(k) or self._buckets.get(k) or Bucket(per_minute, now)
            buckets[k] = b
            return ((scope, b),)

        grants: dict[str, Grant] = {}
        revoked: set[str] = set()
        for r in rows:
            if r.revoked_at is not None:
                revoked.add(r.key_hash)
                continue
            t = tenants.get(r.tenant) or Tenant(name=r.tenant)
            floor = _stricter(Tier(r.tier_floor) if r.tier_floor else None,
                              Tier(t.tier_floor) if t.tier_floor else None)
            expires = aware(r.expires_at).timestamp() if r.expires_at is not None else None
            grants[r.key_hash] = Grant(
                r.tenant, r.prefix, floor, t.priority, expires,
                requests=bucket(f"key {r.prefix}", "rpm", r.rpm) + bucket(f"tenant {t.name}", "rpm", t.rpm),
                tokens=bucket(f"key {r.prefix}", "tpm", r.tpm) + bucket(f"tenant {t.name}", "tpm", t.tpm))
        self._generation = (grants, {})
        self.revoked, self._buckets, self._revision = revoked, buckets, seen
