"""Tenants and their client API keys: who may send requests to the router, at which tiers and how fast.

A key is stored only as its SHA-256 and a short prefix that lets a person recognise it in a list; the key itself
is shown once, when it is created. Rows are never deleted: a revoked key keeps its row (and its audit trail)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class Tenant(SQLModel, table=True):
    """A customer or team: the tier floor the router enforces for all its keys, a priority and rate limits."""

    __tablename__ = "tenant"
    name: str = Field(primary_key=True)
    tier_floor: str | None = None  # fp16 | fp8 | int8 | int4; None = whatever the policy decides
    priority: int = 5  # 1-10; under load a replica sheds low priorities first (router/access/keys.py)
    rpm: int | None = None  # requests per minute, all its keys together; None = unlimited
    tpm: int | None = None  # tokens (prompt + completion) per minute; None = unlimited
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ClientKey(SQLModel, table=True):
    """One API key a client sends as `Authorization: Bearer qk_...`. Its own floor and limits, when set, apply
    on top of its tenant's (the stricter of both)."""

    __tablename__ = "client_key"
    id: int | None = Field(default=None, primary_key=True)
    prefix: str = Field(unique=True)  # the key's first characters, shown in lists ("qk_3f9a1c")
    key_hash: str = Field(unique=True)  # sha256 hex of the whole key
    tenant: str = Field(index=True, foreign_key="tenant.name")
    label: str = ""
    tier_floor: str | None = None
    rpm: int | None = None
    tpm: int | None = None
    expires_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    created_by: str = ""
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    updated_at: datetime = Field(default_factory=utcnow)


def get_tenant(*, session: Session, name: str) -> Tenant | None:
    return session.get(Tenant, name)


def list_tenants(*, session: Session) -> list[Tenant]:
    return list(session.exec(select(Tenant).order_by(Tenant.name)))


def list_keys(*, session: Session, tenant: str | None = None, include_revoked: bool = True) -> list[ClientKey]:
    q = select(ClientKey)
    if tenant is not None:
        q = q.where(ClientKey.tenant == tenant)
    if not include_revoked:
        q = q.where(col(ClientKey.revoked_at).is_(None))
    return list(session.exec(q.order_by(col(ClientKey.id))))


def key_by_prefix(*, session: Session, prefix: str) -> ClientKey | None:
    return session.exec(select(ClientKey).where(ClientKey.prefix == prefix)).first()


class AccessRevision(SQLModel, table=True):
    """One row counting changes to keys and tenants, bumped in each change's transaction. The row lock orders
    the bumps as the commits, so a router that read revision n has seen every change up to n (a maximum of
    timestamps could miss a transaction that committed after a later one)."""

    __tablename__ = "access_revision"
    id: int = Field(default=1, primary_key=True)
    n: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))


def bump_revision(*, session: Session) -> None:
    """Count a change to keys or tenants, in the caller's transaction."""
    updated = session.execute(sa.update(AccessRevision).where(AccessRevision.id == 1)  # type: ignore[arg-type]  # SQLModel types the column as int
                              .values(n=AccessRevision.n + 1))
    if not updated.rowcount:  # type: ignore[attr-defined]  # a CursorResult
        session.add(AccessRevision(id=1, n=1))


def revision(*, session: Session) -> int:
    """What the router polls: it reloads its key table only when this moved."""
    row = session.get(AccessRevision, 1)
    return row.n if row is not None else 0
