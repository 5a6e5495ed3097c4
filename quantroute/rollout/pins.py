"""Release the session pins held on a rolled-back candidate: the same tier, the baseline arm.

Rows are re-armed in place (arm baseline, deployment chosen afresh). Every router replica also re-arms a cached
candidate pin itself on the session's next request once the canary is at 0 %, so no cache eviction is needed.
Sessions that named the candidate's deployment id explicitly keep it."""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from quantroute.db.engine import session as db_session
from quantroute.db.request_log import BASELINE_ARM, CANDIDATE_ARM
from quantroute.db.session_pin import SessionPin


def release_candidate_pins(engine: Engine, *, model: str, router=None) -> int:
    """Move `model`'s candidate-arm pins to the baseline arm. `router` is accepted for callers that pass their
    admin client; it is not needed. Returns how many sessions were released. Found through the partial index on
    the model of candidate-arm pins (ix_session_pin_candidate_model)."""
    with db_session(engine) as s:
        rows = list(s.exec(select(SessionPin).where(SessionPin.model == model, SessionPin.arm == CANDIDATE_ARM,
                                                    col(SessionPin.deployment).is_(None))))
        for r in rows:
            r.arm, r.served_deployment = BASELINE_ARM, None
            s.add(r)
        s.commit()
    return len(rows)
