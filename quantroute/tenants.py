"""Tenants and client API keys, as operators manage them (CLI and dashboard alike): create, list and revoke keys,
set a tenant's tier floor, priority and rate limits. Every write checks the actor's stored role (`key.manage`)
and is audited under the actor's name; a key is shown once and stored only as its SHA-256 and a short prefix.

The router reads these rows into memory (router/access/keys.py) and enforces them on every request."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from quantroute.auth import require
from quantroute.clock import aware, utcnow
from quantroute.db import audit
from quantroute.db.engine import session as open_session
from quantroute.db.node import NodeRow
from quantroute.db.policy_state import active_version, version_row
from quantroute.db.tenant import ClientKey, Tenant, bump_revision, get_tenant, key_by_prefix, list_keys
from quantroute.tiers import TIER_ORDER, Tier, parse_tier

KEY_PREFIX = "qk_"
PREFIX_CHARS = 8  # random characters kept after "qk_" to recognise a key in lists (2^48 values)
TENANT_NAME_CHARS = 64


class TenantError(ValueError):
    """A key or tenant change refused for what it would do; the message names the field and what is valid."""


@dataclass(frozen=True)
class NewKey:
    key: str  # shown once
    row: ClientKey


def key_hash(key: str) -> str:
    """What is stored and looked up: the key is 32 random bytes, so a fast hash is enough (as for user tokens)."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_prefix(key: str) -> str:
    return key[:len(KEY_PREFIX) + PREFIX_CHARS]


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > TENANT_NAME_CHARS or not all(c.isalnum() or c in "-_." for c in name):
        raise TenantError(f"tenant {name!r}: 1-{TENANT_NAME_CHARS} letters, digits, '-', '_' or '.'")
    return name


def _check_limit(field: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise TenantError(f"--{field} must be a positive whole number (or left out for no limit); got {value}")
    return value


def deployed_tiers(engine: Engine) -> set[Tier] | None:
    """Tiers with a deployment in the active policy, or else with a registered node; None when neither is known."""
    from quantroute.policy.loader import parse_policy

    with open_session(engine) as s:
        version = active_version(s)
        row = version_row(s, version) if version is not None else None
        if row is not None:
            policy = parse_policy(row.content, f"policy version {version}")
            return {t.name for t in policy.tiers if any(t.deployments.values())}
        tiers = {Tier(t) for t in s.exec(select(NodeRow.tier).distinct()) if t in Tier._value2member_map_}
    return tiers or None


def check_floor(engine: Engine, floor: str | None) -> Tier | None:
    """The floor as a tier; refused when no tier at or above it is deployed (no request could ever be served)."""
    if floor is None or not floor.strip():
        return None
    try:
        tier = parse_tier(floor)
    except ValueError as e:
        raise TenantError(f"--tier-floor: {e}") from None
    tiers = deployed_tiers(engine)
    if tiers is not None and not any(t.rank <= tier.rank for t in tiers):
        have = ", ".join(t.value for t in TIER_ORDER if t in tiers)
        raise TenantError(f"--tier-floor {tier.value} is above every deployed tier ({have}): no request of this "
                          f"tenant could be served; choose {' or '.join(t.value for t in TIER_ORDER if t in tiers)}")
    return tier


def set_tenant(engine: Engine, *, actor: str, name: str, tier_floor: str | None = None, clear_floor: bool = False,
               priority: int | None = None, rpm: int | None = None, tpm: int | None = None,
               clear_limits: bool = False) -> Tenant:
    """Create tenant `name` or change what is given (None leaves a value as it is)."""
    require(engine, actor, "key.manage")
    name = _check_name(name)
    floor = check_floor(engine, tier_floor)
    if priority is not None and not 1 <= priority <= 10:
        raise TenantError(f"--priority must be 1-10 (10 is shed last under load); got {priority}")
    _check_limit("rpm", rpm)
    _check_limit("tpm", tpm)
    with open_session(engine) as s:
        row = get_tenant(session=s, name=name) or Tenant(name=name)
        before = row.model_dump(include={"tier_floor", "priority", "rpm", "tpm"})
        if floor is not None or clear_floor:
            row.tier_floor = floor.value if floor is not None else None
        if priority is not None:
            row.priority = priority
        if clear_limits:
            row.rpm = row.tpm = None
        row.rpm = rpm if rpm is not None else row.rpm
        row.tpm = tpm if tpm is not None else row.tpm
        row.updated_at = utcnow()
        after = row.model_dump(include={"tier_floor", "priority", "rpm", "tpm"})
        audit.record(s, actor=actor, action="tenant.set", subject=name, detail={"before": before, "after": after})
        bump_revision(session=s)
        s.add(row)
        s.commit()
        s.refresh(row)
        return row


def create_key(engine: Engine, *, actor: str, tenant: str, label: str = "", tier_floor: str | None = None,
               rpm: int | None = None, tpm: int | None = None, expires_at: datetime | None = None) -> NewKey:
    """A new key for `tenant` (created with default settings if new). Its floor and limits, when given, apply on
    top of the tenant's."""
    require(engine, actor, "key.manage")
    tenant = _check_name(tenant)
    floor = check_floor(engine, tier_floor)
    _check_limit("rpm", rpm)
    _check_limit("tpm", tpm)
    if expires_at is not None and aware(expires_at) <= utcnow():
        raise TenantError(f"--expires {expires_at.isoformat()} is in the past; give a later date")
    with open_session(engine) as s:
        if get_tenant(session=s, name=tenant) is None:
            s.add(Tenant(name=tenant))
            audit.record(s, actor=actor, action="tenant.create", subject=tenant)
        while True:
            key = KEY_PREFIX + secrets.token_urlsafe(32)
            if key_by_prefix(session=s, prefix=key_prefix(key)) is None:
                break
        row = ClientKey(prefix=key_prefix(key), key_hash=key_hash(key), tenant=tenant, label=label,
                        tier_floor=floor.value if floor else None, rpm=rpm, tpm=tpm, expires_at=expires_at,
                        created_by=actor)
        s.add(row)
        audit.record(s, actor=actor, action="key.create", subject=row.prefix,
                     detail={"tenant": tenant, "label": label, "tier_floor": row.tier_floor, "rpm": rpm, "tpm": tpm,
                             "expires_at": expires_at.isoformat() if expires_at else None})
        bump_revision(session=s)
        s.commit()
        s.refresh(row)
        return NewKey(key, row)


def revoke_key(engine: Engine, *, actor: str, prefix: str) -> ClientKey:
    """Revoke the key that starts with `prefix`; every router replica refuses it within its refresh interval."""
    require(engine, actor, "key.manage")
    prefix = key_prefix(prefix.strip())
    with open_session(engine) as s:
        row = key_by_prefix(session=s, prefix=prefix)
        if row is None:
            raise TenantError(f"no key with prefix {prefix!r}; `quantroute key list` shows them (qk_ and "
                              f"{PREFIX_CHARS} characters)")
        if row.revoked_at is not None:
            raise TenantError(f"key {prefix} was already revoked by {row.revoked_by} "
                              f"at {row.revoked_at:%Y-%m-%d %H:%M}")
        row.revoked_at = row.updated_at = utcnow()
        row.revoked_by = actor
        s.add(row)
        audit.record(s, actor=actor, action="key.revoke", subject=prefix, detail={"tenant": row.tenant})
        bump_revision(session=s)
        s.commit()
        s.refresh(row)
        return row


def keys(engine: Engine, *, tenant: str | None = None) -> list[ClientKey]:
    with open_session(engine) as s:
        return list_keys(session=s, tenant=tenant)


def tenants(engine: Engine) -> list[Tenant]:
    with open_session(engine) as s:
        return list(s.exec(select(Tenant).order_by(col(Tenant.name))))
