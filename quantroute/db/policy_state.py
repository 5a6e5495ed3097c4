"""Observed state of policy versions (the YAML files are the desired state and never change):
who approved which version, and the history of activations. The newest activation is the active
version as every router replica sees it; the pointer file in policies/ mirrors it for file watchers."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, Session, SQLModel, select

from quantroute.clock import utcnow


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
    row = session.exec(select(PolicyActivation).order_by(PolicyActivation.id.desc()).limit(1)).first()
    return row.version if row else None


def activations(session: Session, *, limit: int = 200) -> list[PolicyActivation]:
    return list(session.exec(select(PolicyActivation).order_by(PolicyActivation.id.desc()).limit(limit)))
