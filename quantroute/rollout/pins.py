"""Release the session pins held on a rolled-back candidate: the same tier, the baseline arm.

The router keeps pins in a per-replica cache in front of the `session_pin` table and has no "re-arm" call,
so this is the smallest thing that works with its admin API: for each pinned candidate session, drop it from
every replica (DELETE /admin/sessions/KEY, which also deletes the row) and write the row back with arm
baseline, same tier and lifetime. A request landing in between starts a fresh pin at 0% (baseline); the
re-written row never overwrites one. Sessions that named the candidate's deployment id explicitly keep it."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.engine import Engine
from sqlmodel import select

from quantroute.db.engine import session as db_session
from quantroute.db.session_pin import SessionPin, create_pin

CANDIDATE, BASELINE = "candidate", "baseline"


def release_candidate_pins(engine: Engine, *, model: str, router=None) -> int:
    """Move `model`'s candidate-arm pins to the baseline arm; `router`: a RouterAdmin to evict caches.
    Returns how many sessions were released."""
    with db_session(engine) as s:
        rows = list(s.exec(select(SessionPin).where(SessionPin.model == model, SessionPin.arm == CANDIDATE,
                                                    SessionPin.deployment == None)))  # noqa: E711
        if router is None:  # no caches to evict: re-arm in place
            for r in rows:
                r.arm = BASELINE
                s.add(r)
            s.commit()
            return len(rows)
    for r in rows:
        router.unpin(r.session_key)
        with db_session(engine) as s:
            create_pin(session=s, pin=SessionPin(session_key=r.session_key, model=r.model, tier=r.tier,
                                                 arm=BASELINE, deployment=None, policy_version=r.policy_version,
                                                 created_at=_aware(r.created_at), last_used=_aware(r.last_used),
                                                 expires_at=_aware(r.expires_at)))
    return len(rows)


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
