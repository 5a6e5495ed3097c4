"""The Rollouts page says whether a controller is watching (the leader's heartbeat, green or red) and lists
webhook notifications that were not delivered; pure line first, then the page through AppTest."""

from __future__ import annotations

from datetime import timedelta

from quantroute.clock import utcnow
from quantroute.controller.status import heartbeat_line
from quantroute.db import controller as heartbeat
from quantroute.db import notification as outbox
from quantroute.db.engine import session
from tests.dashboard.conftest import page


def hb(age_s: float, *, interval: float = 5.0, error: str | None = None) -> heartbeat.ControllerHeartbeat:
    now = utcnow()
    return heartbeat.ControllerHeartbeat(name="host:42", role="leader", started_at=now - timedelta(hours=1),
                                         last_pass_at=now - timedelta(seconds=age_s), interval_s=interval,
                                         last_error=error)


def test_heartbeat_line():
    now = utcnow()
    alive = heartbeat_line(hb(3), now)
    assert alive.ok and alive.text.startswith("controller: alive, last pass 3 s ago (leader host:42, every 5 s)")
    stale = heartbeat_line(hb(47), now)
    assert not stale.ok and stale.text.startswith("controller: no pass for 47 s") and "not watched" in stale.text
    assert not heartbeat_line(None, now).ok and "quantroute controller" in heartbeat_line(None, now).text
    erred = heartbeat_line(hb(1, error="llama3-8b: OperationalError"), now)
    assert not erred.ok and "OperationalError" in erred.text


def test_rollouts_page_shows_the_controller_and_failed_deliveries(stack):
    engine, _ = stack
    at = page("rollouts", "ana", "analyst")
    assert any("none has run against this database" in e.value for e in at.error)
    with session(engine) as s:
        heartbeat.beat(session=s, name="host:42", role="leader", interval_s=5, started_at=utcnow())
        n = outbox.enqueue(session=s, kind="rollback", rollout_id=None, payload={"model": "llama3-8b", "text": "x"})
        s.flush()
        s.add(outbox.WebhookDelivery(notification_id=n.id, url="http://hooks.example/q", status="failed",
                                     attempts=6, last_error="try 6: HTTP 500: boom"))
        s.commit()
    at = page("rollouts", "ana", "analyst")
    assert any(m.value.startswith("controller: alive, last pass") for m in at.success), [m.value for m in at.success]
    assert any("1 webhook notification(s) not delivered" in w.value for w in at.warning)
    table = at.dataframe[0].value
    assert table.iloc[0]["url"] == "http://hooks.example/q" and "HTTP 500" in table.iloc[0]["error"]
