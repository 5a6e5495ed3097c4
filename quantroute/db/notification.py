"""Rollout notifications: an outbox row per notable rollout event, written in the same transaction as the event
(so none is lost or sent for an action that did not commit), and one `webhook_delivery` row per (notification,
URL) that the leading controller keeps while it delivers, retries and gives up. Ids give the order."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, Session, SQLModel, col, select

from quantroute.clock import utcnow


class Notification(SQLModel, table=True):
    """What happened, as sent: `payload` is the JSON body (Slack-compatible `text` plus structured fields)."""

    __tablename__ = "notification"
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, index=True)
    kind: str  # gate_passed | awaiting_approval | step | breach | rollback | rolled_back | promotion
    rollout_id: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class WebhookDelivery(SQLModel, table=True):
    """One notification to one URL: pending (with the time of the next try), delivered, or failed for good."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (UniqueConstraint("notification_id", "url", name="uq_webhook_delivery"),
                      Index("ix_webhook_delivery_url_status", "url", "status"))
    id: int | None = Field(default=None, primary_key=True)
    notification_id: int = Field(foreign_key="notification.id")
    url: str
    status: str = "pending"  # pending | delivered | failed
    attempts: int = 0
    next_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None
    last_error: str | None = None


def enqueue(*, session: Session, kind: str, rollout_id: int | None, payload: dict[str, Any]) -> Notification:
    row = Notification(kind=kind, rollout_id=rollout_id, payload=payload)
    session.add(row)
    return row


def undelivered(*, session: Session, url: str, since: datetime) -> list[tuple[Notification, WebhookDelivery | None]]:
    """Notifications since `since` that `url` has not had (delivered or given up), oldest first, with their
    delivery row when a try was already made."""
    q = (select(Notification, WebhookDelivery)
         .join(WebhookDelivery, (col(WebhookDelivery.notification_id) == Notification.id)
               & (WebhookDelivery.url == url), isouter=True)
         .where(Notification.at >= since)
         .order_by(col(Notification.id)))
    return [(n, d) for n, d in session.exec(q) if d is None or d.status == "pending"]


def failures(*, session: Session, since: datetime, limit: int = 20) -> list[tuple[Notification, WebhookDelivery]]:
    """Deliveries that failed for good or are being retried, newest first (the Rollouts page shows them)."""
    q = (select(Notification, WebhookDelivery)
         .join(WebhookDelivery, col(WebhookDelivery.notification_id) == Notification.id)
         .where(Notification.at >= since, col(WebhookDelivery.last_error).is_not(None),
                WebhookDelivery.status != "delivered")
         .order_by(col(WebhookDelivery.id).desc()).limit(limit))
    return list(session.exec(q))
