"""Policy versions in the database: their content (immutable, the source of truth for every replica on any
host; the YAML files in policies/ mirror it), who approved which version, and the history of activations. The
newest activation is the active version as every router replica sees it; the pointer file mirrors it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class PolicyVersionRow(SQLModel, table=True):
    """One version's YAML exactly as written, with its canonical content hash; never updated."""

    __tablename__ = "policy_version"
    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    parent: int | None = None
    author: str
    message: str = ""
    created_at: datetime
    content: str = Field(sa_column=Column(Text, nullable=False))
    content_hash: str
    stored_at: datetime = Field(default_factory=utcnow)
    stored_by: str  # the author for `policy new`, the importer for `policy import`


class PolicyApproval(SQLModel, table=True):
    """A reviewer's approval of one version; a version has at most one."""

    __tablename__ = "policy_approval"
    version: int = Field(primary_key=True)
    approved_by: str
    at: datetime = Field(default_factory=utcnow)
    comment: str = ""


class PolicyActivation(SQLModel, table=True):
    """Append-only: each activation or rollback. The row with the largest id is the active version."""

    __tablename__ = "policy_activation"
    id: int | None = Field(default=None, primary_key=True)
    version: int = Field(index=True)
    previous: int | None = None
    by: str
    at: datetime = Field(default_factory=utcnow, index=True)
    kind: str = "activate"  # activate | emergency | rollback
    reason: str = ""


def approval_of(session: Session, version: int) -> PolicyApproval | None:
    return session.get(PolicyApproval, version)


def active_version(session: Session) -> int | None:
    row = session.exec(select(PolicyActivation).order_by(col(PolicyActivation.id).desc()).limit(1)).first()
    return row.version if row else None


def activations(session: Session, *, limit: int = 200) -> list[PolicyActivation]:
    return list(session.exec(select(PolicyActivation).order_by(col(PolicyActivation.id).desc()).limit(limit)))


def version_row(session: Session, version: int) -> PolicyVersionRow | None:
    return session.get(PolicyVersionRow, version)


def version_numbers(session: Session) -> list[int]:
    return list(session.exec(select(PolicyVersionRow.version).order_by(col(PolicyVersionRow.version))))


def version_rows(session: Session) -> list[PolicyVersionRow]:
    return list(session.exec(select(PolicyVersionRow).order_by(col(PolicyVersionRow.version))))
