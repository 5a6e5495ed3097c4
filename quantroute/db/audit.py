"""The audit trail: every state change by anyone (who, when, what, policy versions before/after)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class AuditEvent(SQLModel, table=True):
    """One row per action; written by the policy store, rollouts, the router's admin API and the dashboard."""

    __tablename__ = "audit_event"
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    actor: str = Field(index=True)
    action: str = Field(index=True)  # e.g. policy.new, policy.approve, policy.activate, rollout.step
    subject: str = ""  # what it acted on: "policy-0003", "llama3-8b", "session abc"
    version_before: int | None = None
    version_after: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


def record(session: Session, *, actor: str, action: str, subject: str = "",
           version_before: int | None = None, version_after: int | None = None,
           detail: dict[str, Any] | None = None) -> AuditEvent:
    """Adds an event to the caller's transaction (so the event and the change commit together)."""
    ev = AuditEvent(actor=actor, action=action, subject=subject, version_before=version_before,
                    version_after=version_after, detail=detail or {})
    session.add(ev)
    return ev


def list_events(session: Session, *, actor: str | None = None, action_prefix: str | None = None,
                since: datetime | None = None, limit: int = 500) -> list[AuditEvent]:
    q = select(AuditEvent)
    if actor:
        q = q.where(AuditEvent.actor == actor)
    if action_prefix:
        q = q.where(AuditEvent.action.startswith(action_prefix))
    if since:
        q = q.where(AuditEvent.at >= since)
    return list(session.exec(q.order_by(col(AuditEvent.id).desc()).limit(limit)))
