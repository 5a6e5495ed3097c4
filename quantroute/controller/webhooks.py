"""Delivering rollout notifications to webhook URLs (I/O): in order per URL, each retried with exponential
backoff until it is delivered or `max_attempts` tries failed (then it is marked failed and the next one goes).
A notification waiting for its retry holds back the later ones to the same URL, so a receiver never sees them out
of order. Delivery is at least once: a leader that dies between a receiver's 2xx and the write of `delivered`
leaves that one to be sent again by the next leader."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from sqlalchemy.engine import Engine

from quantroute.clock import aware, utcnow
from quantroute.db import notification as outbox
from quantroute.db.engine import session as db_session
from quantroute.db.engine import stored_id


@dataclass(frozen=True)
class Backoff:
    first_s: float = 2.0
    max_attempts: int = 6
    max_age_s: float = 3600.0

    def delay(self, attempts: int) -> timedelta:
        return timedelta(seconds=self.first_s * 2 ** (attempts - 1))


@dataclass
class Outcome:
    delivered: int = 0
    failed_attempts: int = 0
    gave_up: int = 0


def deliver(engine: Engine, client: httpx.Client, urls: list[str], backoff: Backoff,
            now: datetime | None = None) -> Outcome:
    """One delivery round over every URL (the leader calls it once per pass)."""
    out = Outcome()
    now = now or utcnow()
    for url in urls:
        _deliver_to(engine, client, url, backoff, now, out)
    return out


def _deliver_to(engine: Engine, client: httpx.Client, url: str, backoff: Backoff, now: datetime,
                out: Outcome) -> None:
    with db_session(engine) as s:
        todo = outbox.undelivered(session=s, url=url, since=now - timedelta(seconds=backoff.max_age_s))
    for note, d in todo:
        if d is not None and aware(d.next_at) > now:
            return  # waiting for its retry; later notifications wait behind it (order)
        error = _post(client, url, note.payload)
        with db_session(engine) as s:
            row = d if d is not None else outbox.WebhookDelivery(notification_id=stored_id(note), url=url)
            row = s.merge(row)
            row.attempts += 1
            if error is None:
                row.status, row.delivered_at, row.last_error = "delivered", utcnow(), None
                out.delivered += 1
            else:
                out.failed_attempts += 1
                row.last_error = f"try {row.attempts}: {error}"
                if row.attempts >= backoff.max_attempts:
                    row.status = "failed"
                    out.gave_up += 1
                else:
                    row.next_at = now + backoff.delay(row.attempts)
            s.add(row)
            s.commit()
        if error is not None and row.status == "pending":
            return


def _post(client: httpx.Client, url: str, payload: dict) -> str | None:
    """None when the receiver took it (2xx), else what went wrong."""
    try:
        r = client.post(url, json=payload)
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"
    if 200 <= r.status_code < 300:
        return None
    return f"HTTP {r.status_code}: {r.text[:200]}"

