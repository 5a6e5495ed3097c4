"""Hot reload of the active policy version.

Sources of truth for "which version is active": the pointer file `<policies_dir>/active` (watched with
watchfiles) and the newest `policy_activation` row (polled, for replicas on other hosts). A version's content
comes from the database (`policy_version`), so replicas with different policy directories load the same thing;
only a router without a database reads the files. On a change: load, validate, compile, swap one reference. A
version that fails to load, for any reason, leaves the last good one in force; the failure is counted and shown on
`GET /admin/policy`. Requests read `holder.current` once at their start, so in-flight requests finish under the
version they started with.

A version activated through the DB may not be loadable here yet (its file not imported yet): the poll loop tries
it again with backoff until it loads or another version is activated. At start, an active version that cannot
load does not stop the router: it starts on the newest earlier activation that loads, and reports both."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from quantroute.classify import CompiledPolicy, compile_policy
from quantroute.db.engine import session as db_session
from quantroute.db.policy_state import activations, active_version
from quantroute.policy.loader import load_policy
from quantroute.policy.model import Policy
from quantroute.policy.store import PolicyStore
from quantroute.router.path.canary import CANDIDATE
from quantroute.router.path.spill import Target
from quantroute.tiers import Tier, cheapest_served_tier, tiers_at_or_above

log = logging.getLogger(__name__)


def policy_path(policies_dir: Path, version: int) -> Path:
    return policies_dir / f"policy-{version:04d}.yaml"


def read_pointer(policies_dir: Path) -> int:
    """The version named by the pointer file; absent means version 1."""
    p = policies_dir / "active"
    try:
        text = p.read_text().strip()
    except FileNotFoundError:
        return 1
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{p}: expected a version number, got {text[:40]!r}") from None


def seed_default(policies_dir: Path) -> bool:
    """Without a database, a fresh install (no policy files at all) starts from the packaged default."""
    from quantroute.policy.store import default_policy_text

    if policies_dir.is_dir() and any(policies_dir.glob("policy-*.yaml")):
        return False
    policies_dir.mkdir(parents=True, exist_ok=True)
    policy_path(policies_dir, 1).write_text(default_policy_text(), encoding="utf-8")
    log.warning("no policy versions in %s: wrote the packaged default as version 1", policies_dir)
    return True


@dataclass(frozen=True, eq=False)
class ActivePolicy:
    """One loaded version plus what the hot path derives from it, computed once at load."""

    version: int
    policy: Policy
    compiled: CompiledPolicy
    models: frozenset[str]
    deployment_model: dict[str, str]  # deployment id -> logical model
    deployment_tier: dict[str, Tier]
    served: dict[str, frozenset[Tier]]  # logical model -> tiers it is deployed at
    version_bytes: bytes = field(default=b"")
    spill_target: Target | None = None  # the SLO unpinned requests spill up at (path.spill); None: spill off
    # what requests ask again and again, computed on first use: (model, tier) -> ladder, (model, tier, arm) -> ids
    _ladders: dict[tuple[str, Tier], tuple[Tier, ...]] = field(default_factory=dict, repr=False)
    _deployments: dict[tuple[str, Tier, str | None], tuple[str, ...]] = field(default_factory=dict, repr=False)

    def ladder(self, model: str, minimum: Tier) -> tuple[Tier, ...]:
        """Tiers an unpinned request of `model` may go to, cheapest first: the cheapest served tier at or above
        `minimum`, then the served ones above it as far as escalation allows. Empty: no tier serves it."""
        key = (model, minimum)
        got = self._ladders.get(key)
        if got is None:
            served = self.served.get(model, frozenset())
            start = cheapest_served_tier(minimum, set(served))
            if start is None:
                got = ()
            else:
                esc = self.policy.escalation
                up = tiers_at_or_above(start, ceiling=esc.max_tier) if esc.enabled else [start]
                got = tuple(t for t in up if t in served) or (start,)
            self._ladders[key] = got
        return got

    def deployments(self, model: str, tier: Tier, arm: str | None) -> tuple[str, ...]:
        """The deployments of `model` at `tier` for canary `arm` (None: no canary assignment)."""
        key = (model, tier, arm)
        got = self._deployments.get(key)
        if got is None:
            deps = tuple(self.policy.deployments_for(model, tier))
            canary = self.policy.canary_for(model)
            if arm is None or canary is None or canary.baseline not in deps and canary.candidate not in deps:
                got = tuple(d for d in deps if canary is None or d != canary.candidate)
            else:
                got = (canary.candidate,) if arm == CANDIDATE else tuple(d for d in deps if d != canary.candidate)
            self._deployments[key] = got
        return got

    @classmethod
    def build(cls, policy: Policy) -> ActivePolicy:
        dm: dict[str, str] = {}
        dt: dict[str, Tier] = {}
        served: dict[str, set[Tier]] = {}
        for t in policy.tiers:
            for model, deps in t.deployments.items():
                if deps:
                    served.setdefault(model, set()).add(t.name)
                for d in deps:
                    dm[d], dt[d] = model, t.name
        return cls(policy.version, policy, compile_policy(policy), frozenset(policy.models()), dm, dt,
                   {m: frozenset(s) for m, s in served.items()}, str(policy.version).encode(),
                   Target.of(policy.spill))


class PolicyHolder:
    def __init__(self, policies_dir: Path, engine: Engine | None, *, on_change=None, on_failure=None) -> None:
        self.policies_dir = policies_dir
        self.engine = engine
        self.current: ActivePolicy | None = None
        self.failures = 0
        self.last_error: str | None = None
        self.last_error_version: int | None = None
        self.loaded_at: float | None = None
        self.history: list[tuple[int, float]] = []  # (version, wall time swapped in)
        self.wanted: int | None = None  # the version the DB or pointer names, when it differs from current
        self._db_seen: int | None = None
        # With a database its stored content is the truth (any host, any directory); the files only mirror it.
        self.store = PolicyStore(policies_dir, engine) if engine is not None else None
        self._on_change = on_change
        self._on_failure = on_failure
        self._lock = asyncio.Lock()

    @property
    def serving(self) -> ActivePolicy:
        """The version requests run under: load_initial() sets it before the server accepts any request."""
        if self.current is None:
            raise RuntimeError("no policy loaded yet")
        return self.current
    def load_initial(self) -> ActivePolicy:
        """At startup some policy must load: a router with no policy cannot route. The active version first,
        then earlier activations newest first (each was a good version once); the first error if none loads."""
        if self.store is not None:
            want = self._db_version() or self.store.active_version()
        else:
            want = read_pointer(self.policies_dir)
            if want == 1:
                seed_default(self.policies_dir)
        first_error: Exception | None = None
        for v in [want, *self._earlier_activations(want)]:
            try:
                active = self._build(v)
            except Exception as e:  # noqa: BLE001 - any failure: try the next candidate
                if first_error is None:
                    first_error = e
                    self._failed(v, e)
                continue
            self._swap(active)
            if v != want:
                self.wanted = want
                log.error("policy version %d cannot load; started on version %d, the newest that does", want, v)
            return active
        assert first_error is not None  # `want` itself was tried: every candidate failed, the first said why
        raise first_error

    def _earlier_activations(self, want: int) -> list[int]:
        if self.engine is None:
            return []
        try:
            with db_session(self.engine) as s:
                rows = activations(s)
        except Exception as e:  # noqa: BLE001 - the history only offers fallbacks: without it, `want` alone
            log.warning("reading policy_activation history failed: %s", e)
            return []
        seen: list[int] = []
        for r in rows:
            if r.version != want and r.version not in seen:
                seen.append(r.version)
        return seen

    def _build(self, version: int) -> ActivePolicy:
        return ActivePolicy.build(self._load(version))

    def _failed(self, version: int | None, e: Exception) -> None:
        self.failures += 1
        self.last_error = str(e) or type(e).__name__
        self.last_error_version = version
        log.error("policy version %s rejected, keeping version %s: %s", version,
                  self.current.version if self.current else None, self.last_error)
        if self._on_failure:
            self._on_failure()

    def _load(self, version: int) -> Policy:
        if self.store is not None:
            self._import_pointed(version)
            return self.store.load(version)
        policy = load_policy(policy_path(self.policies_dir, version))
        if policy.version != version:
            raise ValueError(f"policy-{version:04d}.yaml says version {policy.version}")
        return policy

    def _import_pointed(self, version: int) -> None:
        """The single-host flow (write policy-NNNN.yaml, point `active` at it) still works: a new version's file
        is imported, audited, before it loads. A file of a version already stored is never read: the hash check
        in the import refuses a hand edit, and the stored content is what loads."""
        if self.store is None:  # no database: versions load from their files, nothing to import
            return
        if version in self.store.versions() or not policy_path(self.policies_dir, version).exists():
            return
        for r in self.store.import_dir(self.policies_dir, by="router (pointer file)"):
            if r.version == version and r.outcome == "refused":
                raise ValueError(f"policy-{version:04d}.yaml was not imported: {r.detail}")

    def _db_version(self) -> int | None:
        if self.engine is None:
            return None
        try:
            with db_session(self.engine) as s:
                v = active_version(s)
        except Exception as e:  # noqa: BLE001 - the pointer file still works without the DB
            log.warning("reading policy_activation failed: %s", e)
            return None
        self._db_seen = v if v is not None else self._db_seen
        return v

    async def activate(self, version: int) -> bool:
        """Load and swap in `version` unless it is already active. False (and last good kept) on failure."""
        async with self._lock:
            if self.current is not None and self.current.version == version:
                self.wanted = None
                return True
            try:
                active = await asyncio.to_thread(self._build, version)
            except Exception as e:  # noqa: BLE001 - whatever breaks a load (bad regex, bug) keeps the last good
                self.wanted = version
                self._failed(version, e)
                return False
            self.wanted = None
            self._swap(active)
            return True

    def _swap(self, active: ActivePolicy) -> None:
        self.current = active  # the one reference requests read
        self.loaded_at = time.time()
        self.history.append((active.version, self.loaded_at))
        del self.history[:-200]
        log.info("policy version %d active", active.version)
        if self._on_change:
            self._on_change(active)

    async def check_pointer(self) -> None:
        try:
            v = await asyncio.to_thread(read_pointer, self.policies_dir)
        except (ValueError, OSError) as e:
            self._failed(None, e)
            return
        await self.activate(v)

    async def watch_pointer(self) -> None:
        from watchfiles import awatch

        self.policies_dir.mkdir(parents=True, exist_ok=True)
        async for changes in awatch(self.policies_dir, debounce=20, step=10, recursive=False):
            if any(Path(p).name == "active" for _, p in changes):
                await self.check_pointer()

    async def poll_db(self, interval: float, *, max_backoff_s: float = 30.0) -> None:
        """Replicas on other hosts see activations through the DB. Only a *change* of the newest row
        triggers a load, so a local pointer edit is not undone by an older DB row. A DB-named version that
        failed to load is tried again, every interval doubling up to `max_backoff_s`, until it loads or the
        DB names another version."""
        retry_at, backoff = None, interval
        while True:
            await asyncio.sleep(interval)
            prev = self._db_seen
            v = await asyncio.to_thread(self._db_version)
            if v is not None and v != prev:
                retry_at, backoff = None, interval
                if not await self.activate(v):
                    retry_at = time.monotonic() + backoff
            elif self.wanted is not None and self.wanted == self._db_seen and (
                    retry_at is None or time.monotonic() >= retry_at):
                if await self.activate(self.wanted):
                    retry_at, backoff = None, interval
                else:
                    backoff = min(backoff * 2, max_backoff_s)
                    retry_at = time.monotonic() + backoff

    def view(self) -> dict:
        cur = self.current
        return {"version": cur.version if cur else None, "wanted_version": self.wanted,
                "author": cur.policy.author if cur else None,
                "message": cur.policy.message if cur else None,
                "content_hash": cur.policy.content_hash if cur else None,
                "loaded_at": self.loaded_at, "reload_failures": self.failures,
                "last_error": self.last_error, "last_error_version": self.last_error_version,
                "history": [{"version": v, "at": t} for v, t in self.history[-20:]]}
