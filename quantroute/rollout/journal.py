"""The rollout's write side: each decided transition written as the row's next revision (compare-and-swap),
with its policy version, event, audit row and notifications in one transaction, then activated and observed.
`RolloutService` decides what to do; this module is how it is recorded, so every actor (CLI, dashboard,
controller) writes a transition the same way."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from quantroute.admin_client import RouterAdmin
from quantroute.db import audit
from quantroute.db import notification as outbox
from quantroute.db import rollout as db
from quantroute.db.engine import session as db_session
from quantroute.db.engine import stored_id
from quantroute.policy.store import PolicyStore
from quantroute.rollout import activation, machine, notify
from quantroute.rollout.errors import RolloutConflict, RolloutRefused
from quantroute.rollout.machine import Phase
from quantroute.rollout.pins import release_candidate_pins

MAX_RACES = 5  # lost compare-and-swaps before an action gives up
# After losing a race these actions are decided again on the fresh row (sending traffic back to the baseline
# stays right whatever happened meanwhile); every other action is refused when the phase or step moved.
REDECIDE = (machine.Rollback, machine.GuardBreach)


class RolloutJournal:
    def __init__(self, store: PolicyStore, *, router: RouterAdmin | None, clock: Callable[[], datetime],
                 actor_detail: dict[str, Any], after_status_write: Callable[[db.Rollout], None] | None) -> None:
        self.store = store
        self.engine = store.engine
        self.router = router
        self.clock = clock
        self.actor_detail = actor_detail  # added to every event written (the controller's name)
        self.after_status_write = after_status_write

    @staticmethod
    def state(row: db.Rollout | None) -> machine.State:
        if row is None:
            return machine.State(None)
        return machine.State(Phase(row.phase), tuple(row.steps), row.step_index, row.percent, row.started_by)

    def by_id(self, rollout_id: int) -> db.Rollout:
        with db_session(self.engine) as s:
            row = db.get_rollout(session=s, rollout_id=rollout_id)
        assert row is not None, f"rollout {rollout_id} vanished"
        return row

    def refused(self, row: db.Rollout, by: str, name: str, reason: str) -> None:
        with db_session(self.engine) as s:
            s.add(db.RolloutEvent(rollout_id=stored_id(row), actor=by, action=name,
                                  phase_before=row.phase,
                                  phase_after=row.phase, percent_before=row.percent, percent_after=row.percent,
                                  refused=True, message=reason))
            s.commit()

    def apply(self, row: db.Rollout, by: str, action: machine.Action, *, detail: dict | None = None,
               changes: dict | None = None) -> db.Rollout:
        """Decide `action` on `row` and write the outcome as the row's next revision. A lost race re-reads the
        row: rollbacks and breaches are decided again on it; other actions go on only if the phase and step
        are still those they were decided on, else they are refused (`RolloutConflict`)."""
        name = machine.action_name(action)
        for _ in range(MAX_RACES):
            out = machine.decide(self.state(row), action)
            if isinstance(out, machine.Refusal):
                self.refused(row, by, name, out.reason)
                raise RolloutRefused(out.reason, out.allowed)
            won = self.commit(row, by, name, out, detail, changes or {})
            if won is not None:
                return won
            fresh = self.by_id(stored_id(row))
            if not isinstance(action, REDECIDE) and (fresh.phase, fresh.step_index) != (row.phase, row.step_index):
                reason = (f"{name} refused: rollout {row.id} changed while you acted (it was {row.phase} at "
                          f"{row.percent:g}%, now {fresh.phase} at {fresh.percent:g}%: {fresh.message}); nothing "
                          "was done - check its status and act again")
                self.refused(fresh, by, name, reason)
                raise RolloutConflict(reason, machine.allowed_actions(Phase(fresh.phase)))
            row = fresh
        raise RolloutConflict(f"{name} refused: rollout {row.id} kept changing ({MAX_RACES} attempts); try again")

    def commit(self, row: db.Rollout, by: str, name: str, out: machine.Transition, detail: dict | None,
                changes: dict) -> db.Rollout | None:
        """Write one transition: version file, then the row's compare-and-swap (with its event), then, only
        for the winner, activation. None when another actor wrote the row first."""
        if self.by_id(stored_id(row)).revision != row.revision:
            return None  # already lost: write no version nobody will serve
        new = db.Rollout(**{**row.model_dump(), **changes})
        v_active = self.store.active_version()
        v_after, written = (activation.write(self.store, new, out, name, by) if out.traffic
                            else (row.policy_version, False))
        now = self.clock()
        new.phase, new.step_index, new.percent = out.phase, out.state.step_index, out.state.percent
        new.updated_at, new.message, new.policy_version = now, out.message, v_after
        if out.aborted:
            new.aborted_reason = out.aborted
        if out.traffic:
            new.step_at = now
            new.history = [*row.history, {"percent": new.percent, "at": now.isoformat(), "version": v_after}]
        with db_session(self.engine) as s:
            if not db.swap_rollout(session=s, rollout=new, revision=row.revision):
                s.rollback()
                return None
            self.event(s, new, by, name, row.phase, row.percent, v_active, v_after if out.traffic else v_active,
                        out.message, detail)
            s.commit()
        if self.after_status_write is not None:
            self.after_status_write(new)
        rolling_back = out.state.phase == Phase.rolling_back
        if written:
            activation.activate(self.store, new, v_after, by=by, rollback=rolling_back)  # type: ignore[arg-type]  # v_after is set whenever traffic moves
        if out.traffic:
            again = activation.settle(self.store, self.engine, rollout_id=stored_id(new), revision=new.revision,
                                      by=by)
            self.observe(new)
            if again is not None:
                # This activation overtook a later revision's; a rollback among them may have looked for its
                # version in between and returned unfinished: now that it is active again, finish it here.
                self.finish_rollback(self.by_id(stored_id(new)), by)
        if rolling_back:
            return self.finish_rollback(new, by)
        return new

    def event(self, s, row: db.Rollout, by: str, name: str, phase_before: str | None, pct_before: float,
               v_before: int | None, v_after: int | None, message: str, detail: dict | None = None) -> None:
        """The rollout event, its audit row (with the figures that caused it) and, for the events people want to
        hear about, the notifications: all in the caller's transaction, so they commit with the status or not."""
        detail = {**self.actor_detail, **(detail or {})}
        ev = db.add_event(session=s, event=db.RolloutEvent(
            rollout_id=stored_id(row), actor=by, action=name, phase_before=phase_before, phase_after=row.phase,
            percent_before=pct_before, percent_after=row.percent, version_before=v_before, version_after=v_after,
            message=message, detail=detail))
        audit.record(s, actor=by, action=f"rollout.{name}", subject=row.model, version_before=v_before,
                     version_after=v_after, detail={"rollout_id": row.id, "candidate": row.candidate,
                                                    "phase": row.phase, "percent": row.percent, "message": message,
                                                    **detail})
        for kind in notify.kinds_for(name, row.phase):
            outbox.enqueue(session=s, kind=kind, rollout_id=row.id, payload=notify.payload(
                kind, model=row.model, rollout_id=row.id, candidate=row.candidate, baseline=row.baseline, actor=by,
                action=name, at=ev.at.isoformat(), message=message, phase_before=phase_before,
                phase_after=row.phase, percent_before=pct_before, percent_after=row.percent,
                version_before=v_before, version_after=v_after, detail=detail))

    def observe(self, row: db.Rollout) -> bool:
        if row.policy_version is None or not activation.observed(self.store, row):
            return False
        with db_session(self.engine) as s:
            db.mark_observed(session=s, rollout_id=stored_id(row), version=row.policy_version)
            s.commit()
        return True

    def finish_rollback(self, row: db.Rollout, by: str) -> db.Rollout:
        """rolling-back -> rolled-back once its version is observed active; then candidate pins go back to the
        baseline. Returns the row as it stands (still rolling-back when traffic has not moved)."""
        if row.phase != Phase.rolling_back.value or not self.observe(row):
            return row
        try:
            row = self.apply(row, by, machine.TrafficMoved(version=row.policy_version or 0),
                              detail={"observed_version": row.policy_version})
        except RolloutRefused:
            return self.by_id(stored_id(row))
        released = release_candidate_pins(self.engine, model=row.model, router=self.router)
        if released:
            with db_session(self.engine) as s:
                audit.record(s, actor=by, action="rollout.release_pins", subject=row.model,
                             detail={"rollout_id": row.id, "sessions": released})
                s.commit()
        return row
