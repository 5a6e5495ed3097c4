"""The rollout service: the I/O edge around the pure state machine. These are the functions the CLI and the
dashboard call; each takes the logical model and the acting person, and returns the rollout's status or
raises `RolloutRefused` with the machine's reason.

    svc = RolloutService(PolicyStore("policies", engine), router=RouterAdmin([url], token))
    svc.start("llama3-8b", candidate="llama3-8b-awq-w4a16-v2", by="alice")
    svc.check_gate("llama3-8b")          # gated -> awaiting-approval once a passing eval run exists
    svc.tick("llama3-8b", ["kernel_support"], by="carol")   # checklist items only a person can know
    svc.approve("llama3-8b", by="bob")   # a reviewer other than the starter; candidate at the first step
    svc.step("llama3-8b", by="alice")    # next percent, only when the guards pass
    svc.evaluate_guards("llama3-8b")     # breach -> automatic rollback; pass + dwell -> auto-advance
    svc.rollback("llama3-8b", by="alice", reason="...")   # any phase, no approval, at once
    svc.reconcile("llama3-8b")           # the controller's pass: finish unfinished traffic, gate, guards

Every transition that changes traffic writes a new policy version (author `rollout`) and activates it: steps
and the promotion are approved on the store by the rollout's reviewer (their approval covers its steps);
rollbacks use the store's emergency activation, which needs no approval and is recorded as such. The router
hot-reloads the active version from the pointer file at once and from the DB within its poll interval.

Desired vs observed: the row's `policy_version` is the desired traffic; `observed_version` is set once that
version was seen active. A rollback is written as `rolling-back` and becomes `rolled-back` only after its version
is observed active; a crash in between (or a failed activation) is completed by `reconcile`, which the
controller calls for every unfinished rollout on every pass.

Several actors may act on one rollout at once (the controller, people on the CLI and the dashboard).
Each status write is a compare-and-swap on the row's revision; the loser re-reads: a rollback or a guard
breach is decided again on the fresh row, anything else is refused (`RolloutConflict`) once the phase or step
moved. So two steps from one state advance once and nothing steps after a rollback (see `activation.py`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from quantroute.admin_client import RouterAdmin
from quantroute.auth import controllers, require
from quantroute.clock import utcnow
from quantroute.db import audit
from quantroute.db import rollout as db
from quantroute.db.engine import session as db_session
from quantroute.db.engine import stored_id
from quantroute.policy.model import CanarySpec, Policy
from quantroute.policy.store import PolicyStore
from quantroute.rollout import activation, facts, machine, versions
from quantroute.rollout import checklist as cl
from quantroute.rollout.errors import RolloutConflict, RolloutRefused
from quantroute.rollout.guards import GuardVerdict
from quantroute.rollout.journal import RolloutJournal
from quantroute.rollout.machine import Phase
from quantroute.rollout.status import RolloutStatus
from quantroute.rollout.window import guard_verdict

__all__ = ["RolloutConflict", "RolloutRefused", "RolloutService", "RolloutStatus"]  # callers import them here

SYSTEM = activation.SYSTEM  # author of the policy versions a rollout writes
GUARD_ACTOR = "rollout-guard"
CONTROLLER = "controller"  # the actor of everything `quantroute controller` does
# A status write younger than this is not healed yet: its own actor is normally activating it that very moment
# (milliseconds), and healing it too would activate the same version twice.
HEAL_GRACE_S = 1.0


class RolloutService:
    def __init__(self, store: PolicyStore, *, router: RouterAdmin | None = None,
                 clock: Callable[[], datetime] = utcnow, target_concurrency: int | None = None,
                 actor_detail: dict[str, Any] | None = None,
                 after_status_write: Callable[[db.Rollout], None] | None = None) -> None:
        self.store = store
        self.engine = store.engine
        self.router = router
        self.clock = clock
        self.target_concurrency = target_concurrency
        self.actor_detail = actor_detail or {}  # added to every event this service writes (the controller's name)
        # Called after a traffic transition's status row committed and before its version is activated: the
        # point where a crash could leave a rollout claiming traffic that never moved (fault injection).
        self.after_status_write = after_status_write
        self.journal = RolloutJournal(store, router=router, clock=clock, actor_detail=self.actor_detail,
                                      after_status_write=after_status_write)

    # ---- actions -----------------------------------------------------------------------------------------

    def start(self, model: str, *, candidate: str, by: str, target_concurrency: int | None = None) -> RolloutStatus:
        """Start a rollout of `candidate` for `model`. The active policy's canary spec for the model must name
        this candidate (spec is desired state: change it with a reviewed policy version). `target_concurrency`:
        the concurrency the candidate's staircase load test must have passed at (checklist item
        staircase_load_test); default the service's, else any step that met every limit."""
        require(self.engine, by, "rollout.start")
        if target_concurrency is not None and (isinstance(target_concurrency, bool)
                                               or not isinstance(target_concurrency, int) or target_concurrency < 1):
            raise RolloutRefused(f"start refused: target_concurrency must be a whole number of concurrent "
                                 f"requests >= 1, got {target_concurrency!r}")
        policy = self.store.active()
        spec = policy.canary_for(model)
        if spec is None:
            raise RolloutRefused(f"start refused: policy version {policy.version} has no canary for {model!r}; "
                                 "add one under canaries (model, baseline, candidate, steps, guards)")
        if candidate != spec.candidate and candidate != spec.baseline:
            raise RolloutRefused(f"start refused: the canary of {model!r} in policy version {policy.version} "
                                 f"names candidate {spec.candidate!r}, not {candidate!r}; change the spec first")
        if by == SYSTEM:
            raise RolloutRefused(f"start refused: {SYSTEM!r} is the system's name; give a person's name")
        live = self._row(model)
        state = self.journal.state(live)
        missing = versions.missing_metadata(policy, candidate)
        pin = policy.deployments[candidate].eval_suite if candidate in policy.deployments else ""
        gate = facts.eval_gate(self.engine, spec, pin) if pin else None
        out = machine.decide(state, machine.Start(by=by, candidate=candidate, baseline=spec.baseline,
                                                  steps=tuple(spec.steps), missing_metadata=missing,
                                                  eval_failed=gate.failed if gate else None))
        if isinstance(out, machine.Refusal):
            if live is not None and live.id is not None:
                self.journal.refused(live, by, "start", out.reason)
            raise RolloutRefused(out.reason, out.allowed)
        now = self.clock()
        with db_session(self.engine) as s:
            try:
                row = db.create_rollout(session=s, rollout=db.Rollout(
                    model=model, candidate=candidate, baseline=spec.baseline,
                    phase=out.phase,
                    steps=list(spec.steps), started_at=now, updated_at=now, step_at=now, started_by=by,
                    target_concurrency=target_concurrency or self.target_concurrency,
                    start_version=policy.version, policy_version=policy.version, message=out.message))
            except IntegrityError:
                # another start of this model committed after our read (the one-live-rollout index)
                s.rollback()
                other = self._row(model)
                now_at = f"; it is {other.phase}, started by {other.started_by}" if other else ""
                raise RolloutConflict(f"start refused: another rollout of {model!r} was started while you "
                                      f"acted{now_at}. Nothing was done.") from None
            self.journal.event(s, row, by, "start", None, 0.0, policy.version, policy.version, out.message)
            s.commit()
        return self.check_gate(model) if gate and gate.passing else self.status(model)

    def check_gate(self, model: str, *, by: str = "eval-gate") -> RolloutStatus:
        """While gated: open the gate if the newest eval run on the pinned suite passed."""
        row = self._live(model)
        if row.phase == Phase.gated.value:
            spec, policy = self._spec(row)
            gate = facts.eval_gate(self.engine, spec, policy.deployments[row.candidate].eval_suite)
            if gate.passing is None:
                raise RolloutRefused(f"the eval gate is closed: {gate.detail}")
            self.journal.apply(row, by, machine.EvalPassed(run_id=gate.passing.id or 0),
                        changes={"eval_run_id": gate.passing.id})
        return self.status(model)

    def approve(self, model: str, *, by: str) -> RolloutStatus:
        """A reviewer who did not start the rollout; refused while a required checklist item is open.
        The candidate gets the first step's share of new sessions."""
        require(self.engine, by, "rollout.approve")
        row = self._live(model)
        if row.phase == Phase.gated.value:
            self.check_gate(model)
            row = self._live(model)
        if by == SYSTEM:
            raise RolloutRefused(f"approve refused: {SYSTEM!r} is the system's name; give a person's name")
        if row.started_by in controllers(self.engine, by):
            raise RolloutRefused(f"approve refused: {row.started_by} started this rollout and set a password of "
                                 f"{by}'s (so could act as {by}); a reviewer {row.started_by} did not create must "
                                 "approve")
        open_items = tuple(self.checklist(model).open_required) if row.phase == Phase.awaiting_approval.value else ()
        # the version written for the first step is approved on the store by this reviewer
        return self._act(row, by, machine.Approve(by=by, open_items=open_items), changes={"approved_by": by})

    def step(self, model: str, *, by: str) -> RolloutStatus:
        """To the next percent, when the guards pass (inconclusive holds; a breach rolls back)."""
        require(self.engine, by, "rollout.step")
        return self._advance(model, by, machine.Step)

    def promote(self, model: str, *, by: str) -> RolloutStatus:
        """At the last step, with passing guards: the candidate becomes the baseline of its tier."""
        require(self.engine, by, "rollout.promote")
        return self._advance(model, by, machine.Promote)

    def pause(self, model: str, *, by: str) -> RolloutStatus:
        require(self.engine, by, "rollout.pause")
        return self._act(self._live(model), by, machine.Pause())

    def resume(self, model: str, *, by: str) -> RolloutStatus:
        require(self.engine, by, "rollout.resume")
        return self._act(self._live(model), by, machine.Resume())

    def rollback(self, model: str, *, by: str, reason: str = "") -> RolloutStatus:
        """One action from any phase, no approval: a new version with the canary at 0% activated at once
        (the promotion undone when promoted), then candidate session pins are released to the baseline."""
        require(self.engine, by, "rollout.rollback")
        return self._act(self._live(model, finished_ok=True), by, machine.Rollback(reason=reason or f"by {by}"))

    def tick(self, model: str, items: list[str], *, by: str, note: str = "") -> RolloutStatus:
        """A named person ticks checklist items the system cannot know (a reviewer vouches for them)."""
        require(self.engine, by, "rollout.approve")
        row = self._live(model, finished_ok=True)
        found = self._facts(row)
        for item in items:
            why = cl.person_may_tick(item, found)
            if why:
                raise RolloutRefused(f"tick refused: {why}")
        with db_session(self.engine) as s:
            for item in items:
                db.tick(session=s, rollout_id=stored_id(row), item=item, by=by, note=note)
            audit.record(s, actor=by, action="rollout.tick", subject=model,
                         detail={"rollout_id": row.id, "items": items, "note": note})
            s.commit()
        return self.status(model)

    # ---- guards ------------------------------------------------------------------------------------------

    def guard_verdict(self, model: str) -> GuardVerdict | None:
        """The guards over the current window, without acting on them (None: no traffic on the candidate)."""
        row = self._row(model)
        if row is None or row.phase not in (Phase.progressing.value, Phase.paused.value):
            return None
        return self._verdict(row)

    def evaluate_guards(self, model: str, *, by: str = GUARD_ACTOR) -> GuardVerdict | None:
        """Breach -> automatic rollback (guard, figures and window recorded) once `failure_limit` evaluations in
        a row breached, the step holds until then; inconclusive -> the step holds;
        pass -> auto-advance when the canary has `auto_advance_s` and the current step has dwelt that long."""
        row = self._row(model)
        if row is None or row.phase not in (Phase.progressing.value, Phase.paused.value):
            return None
        v = self._verdict(row)
        if v.status == "breach":
            try:
                self._breach(row, by, v)
            except RolloutRefused:
                now_phase = Phase(self.journal.by_id(stored_id(row)).phase)
                if not (now_phase.terminal or now_phase == Phase.rolling_back):
                    raise
                # someone rolled it back (or promoted it) meanwhile: nothing left for this breach to do
            return v
        if row.breach_streak:
            row = self._reset_streak(row)
        try:
            figures = {"verdict": v.model_dump(mode="json")}
            if v.status == "inconclusive":
                if row.phase == Phase.progressing.value and not row.message.startswith("held"):
                    self.journal.apply(row, by, machine.GuardInconclusive(summary=v.summary), detail=figures)
            else:
                spec, _ = self._spec(row)
                dwelt = (self.clock() - row.step_at).total_seconds()
                if (spec.auto_advance_s and row.phase == Phase.progressing.value and dwelt >= spec.auto_advance_s
                        and row.step_index < len(row.steps) - 1):
                    self.journal.apply(row, by, machine.DwellElapsed(guards="pass", why=v.summary), detail=figures)
        except RolloutConflict:
            pass  # a person acted meanwhile: the next evaluation judges the rollout as it is now
        return v

    def _breach(self, row: db.Rollout, by: str, v: GuardVerdict) -> tuple[int, int]:
        """Count a breaching evaluation; at the canary's failure_limit it rolls back. (count, limit)."""
        spec, _ = self._spec(row)
        count, limit = row.breach_streak + 1, spec.guards.failure_limit
        breach = v.model_dump(mode="json")
        changes: dict[str, Any] = {"breach_streak": count}
        if count >= limit:
            changes["breach"] = breach  # the verdict that rolled it back, shown with the rollout
        self.journal.apply(row, by, machine.GuardBreach(summary=v.summary, count=count, limit=limit),
                    detail={"verdict": breach}, changes=changes)
        return count, limit

    def _reset_streak(self, row: db.Rollout) -> db.Rollout:
        """A passing or inconclusive evaluation ends a run of breaches (bookkeeping only: no event). Returns
        the row as now stored: the reset one, or whatever another actor wrote first."""
        new = db.Rollout(**{**row.model_dump(), "breach_streak": 0})
        with db_session(self.engine) as s:
            if db.swap_rollout(session=s, rollout=new, revision=row.revision):
                s.commit()
                return new
        return self.journal.by_id(stored_id(row))

    def _verdict(self, row: db.Rollout) -> GuardVerdict:
        spec, policy = self._spec(row)
        return guard_verdict(self.engine, row, spec, policy, self.clock())

    # ---- reconciliation (the controller) ---------------------------------------------------------------------

    def reconcile(self, model: str, *, by: str = CONTROLLER) -> list[str]:
        """One pass over `model`'s newest rollout, idempotent: make the router-visible traffic match the desired
        state (activate a version a crash left unactivated), finish a rollback whose traffic moved, open the eval
        gate when a passing run exists, and evaluate the guards (breach -> rollback after failure_limit, dwell ->
        advance). Returns the messages of the events it wrote, in order (empty: nothing to do)."""
        row = self._row(model)
        if row is None:
            return []
        with db_session(self.engine) as s:
            seen = max((e.id or 0 for e in db.events_of(session=s, rollout_id=stored_id(row))), default=0)
        if not row.converged and (self.clock() - row.updated_at).total_seconds() >= HEAL_GRACE_S:
            self._heal(row, by)
            row = self.journal.by_id(stored_id(row))
        if row.phase == Phase.rolling_back.value:
            self.journal.finish_rollback(row, by)
        elif row.phase == Phase.gated.value:
            try:
                self.check_gate(model, by=by)
            except RolloutRefused:
                pass  # the gate stays closed until a passing eval run exists
        elif row.phase in (Phase.progressing.value, Phase.paused.value):
            self.evaluate_guards(model, by=by)
        with db_session(self.engine) as s:
            return [e.message for e in db.events_of(session=s, rollout_id=stored_id(row))
                    if (e.id or 0) > seen and e.actor == by and not e.refused]

    def _heal(self, row: db.Rollout, by: str) -> str | None:
        """The row's desired version is not observed active. When it is newer than the active one it was written
        and never activated (a crash or an activation error): activate it. A rollback whose version was overtaken
        by a later activation gets a new version at 0 % (sending traffic back is right whatever happened). Any
        other drift (a person activated another version) is not the controller's to undo."""
        if activation.observed(self.store, row):
            self.journal.observe(row)
            return None
        v_active, want = self.store.active_version(), row.policy_version
        rollback = row.phase in (Phase.rolling_back.value, Phase.rolled_back.value)
        if want is not None and want > v_active:
            activation.activate(self.store, row, want, by=by, rollback=rollback)
            what = (f"activated policy version {want} ({row.phase} at {row.percent:g}%), written but never "
                    f"activated: version {v_active} was active")
        elif row.phase == Phase.rolling_back.value:
            out = machine.Transition(self.journal.state(row), True, row.message)
            want, written = activation.write(self.store, row, out, "reconcile", by)
            if written:
                activation.activate(self.store, row, want, by=by, rollback=True)
            new = db.Rollout(**{**row.model_dump(), "policy_version": want})
            with db_session(self.engine) as s:
                if not db.swap_rollout(session=s, rollout=new, revision=row.revision):
                    return None  # someone else moved it: the next pass looks again
                s.commit()
            row = new
            what = (f"rollback's version was overtaken by version {v_active}; wrote and activated version {want} "
                    "with the canary at 0%")
        else:
            return None
        with db_session(self.engine) as s:
            self.journal.event(s, row, by, "reconcile", row.phase, row.percent, v_active, want, what,
                        {"found_active": v_active, "desired": want, "phase": row.phase, "percent": row.percent})
            s.commit()
        self.journal.observe(row)
        return what

    # ---- reading -----------------------------------------------------------------------------------------

    def status(self, model: str) -> RolloutStatus:
        row = self._live(model, finished_ok=True)
        spec, policy = self._spec(row)
        gate = facts.eval_gate(self.engine, spec, policy.deployments[row.candidate].eval_suite)
        with db_session(self.engine) as s:
            events = [e.model_dump(mode="json", exclude={"rollout_id"})
                      for e in db.events_of(session=s, rollout_id=stored_id(row))]
        return RolloutStatus(id=stored_id(row), model=row.model, candidate=row.candidate,
                             baseline=row.baseline,
                             phase=row.phase, steps=row.steps, step_index=row.step_index, percent=row.percent,
                             started_at=row.started_at, updated_at=row.updated_at, started_by=row.started_by,
                             approved_by=row.approved_by, target_concurrency=row.target_concurrency,
                             policy_version=row.policy_version, message=row.message,
                             aborted_reason=row.aborted_reason, breach=row.breach, gate=gate.detail,
                             checklist=self._checklist(row).items, guards=self.guard_verdict(model), events=events)

    def checklist(self, model: str) -> cl.Checklist:
        return self._checklist(self._live(model, finished_ok=True))

    def list(self, model: str | None = None) -> list[db.Rollout]:
        with db_session(self.engine) as s:
            return db.list_rollouts(session=s, model=model)

    def _checklist(self, row: db.Rollout) -> cl.Checklist:
        with db_session(self.engine) as s:
            ticks = {k: v.ticked_by for k, v in db.ticks_of(session=s,
                                                            rollout_id=stored_id(row)).items()}
        return cl.evaluate(self._facts(row), ticks)

    def _facts(self, row: db.Rollout) -> dict[str, cl.Fact]:
        spec, policy = self._spec(row)
        meta = policy.deployments.get(row.candidate)
        gate = facts.eval_gate(self.engine, spec, meta.eval_suite if meta else "")
        out = {"artifact_metadata": facts.metadata_fact(policy, row.candidate,
                                                        versions.missing_metadata(policy, row.candidate)),
               "eval_gate": cl.Fact(ok=gate.passing is not None, detail=gate.detail),
               "eval_coverage": facts.eval_coverage(gate.passing),
               "staircase_load_test": facts.staircase_fact(self.engine, row.candidate, row.target_concurrency),
               "guards_configured": facts.guards_fact(spec)}
        out.update(facts.node_facts(self.engine, self.router, spec))
        return out

    # ---- internals ---------------------------------------------------------------------------------------

    def _row(self, model: str) -> db.Rollout | None:
        with db_session(self.engine) as s:
            return db.current_rollout(session=s, model=model)

    def _live(self, model: str, *, finished_ok: bool = False) -> db.Rollout:
        row = self._row(model)
        if row is None or (not finished_ok and Phase(row.phase).terminal):
            last = f" (the last one is {row.phase})" if row else ""
            raise RolloutRefused(f"no rollout of {model!r} in progress{last}; start one with "
                                 f"`quantroute rollout start {model} --candidate DEPLOYMENT` (as an operator)",
                                 ("start",))
        return row

    def _spec(self, row: db.Rollout) -> tuple[CanarySpec, Policy]:
        """The canary spec and the policy carrying the candidate's metadata (after a promotion the active
        version no longer has the spec, so the version the rollout started from does)."""
        active = self.store.active()
        spec = active.canary_for(row.model)
        if spec is not None and spec.candidate == row.candidate and row.candidate in active.deployments:
            return spec, active
        before = self.store.load(row.start_version) if row.start_version else active
        spec = before.canary_for(row.model)
        if spec is None:
            raise RolloutRefused(f"policy version {before.version} has no canary for {row.model!r}")
        return spec, before

    def _advance(self, model: str, by: str, kind) -> RolloutStatus:
        """Step or promote, decided on the row as read here: if anyone moves the rollout before this write
        (an auto-advance, another person's step, a rollback), the compare-and-swap refuses it."""
        row = self._live(model)
        verdict = self._verdict(row) if row.phase in (Phase.progressing.value, Phase.paused.value) else None
        if verdict is not None and verdict.status == "breach":
            count, limit = self._breach(row, GUARD_ACTOR, verdict)
            done = ("rolled back automatically" if count >= limit
                    else f"breach {count} of {limit} before the automatic rollback; the step holds")
            raise RolloutRefused(f"{machine.action_name(kind)} refused: guards breached, {done}: {verdict.summary}")
        status = verdict.status if verdict else "pass"
        return self._act(row, by, kind(guards=status, why=verdict.summary if verdict else ""),
                         changes={"breach_streak": 0} if row.breach_streak else None)

    def _act(self, row: db.Rollout, by: str, action: machine.Action, *, changes: dict | None = None) -> RolloutStatus:
        self.journal.apply(row, by, action, changes=changes)
        return self.status(row.model)
