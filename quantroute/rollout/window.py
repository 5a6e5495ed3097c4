"""Which traffic a rollout's guards compare, read from the request log, the eval runs and the shadow pairs: the
candidate's and the baseline's arm over the guard window (the baseline's last window before 100 % once it gets
no new sessions), the eval gate and live agreement; the verdict itself is the pure `guards.evaluate`."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from quantroute.db import rollout as db
from quantroute.db.request_log import BASELINE_ARM, CANDIDATE_ARM
from quantroute.policy.model import CanarySpec, Policy
from quantroute.rollout import facts
from quantroute.rollout.guards import GuardVerdict, Window, evaluate


def guard_verdict(engine: Engine, row: db.Rollout, spec: CanarySpec, policy: Policy, now: datetime) -> GuardVerdict:
    g = spec.guards
    first = _at(row.history[0]) if row.history else row.step_at
    start = max(now - timedelta(seconds=g.window_s), first)
    cand = facts.arm_window(engine, model=row.model, deployment=row.candidate, arm=CANDIDATE_ARM,
                            start=start, end=now)
    base = facts.arm_window(engine, model=row.model, deployment=row.baseline, arm=BASELINE_ARM,
                            start=start, end=now)
    window = Window(start=start, end=now)
    full = [h for h in row.history if h["percent"] >= 100]
    if full and base.requests < g.min_requests:
        # At 100% new sessions no longer reach the baseline: compare with its last window before that.
        t100 = _at(full[-1])
        bstart = max(t100 - timedelta(seconds=g.window_s), first)
        base = facts.arm_window(engine, model=row.model, deployment=row.baseline, arm=BASELINE_ARM,
                                start=bstart, end=t100)
        window = Window(start=start, end=now, baseline_start=bstart, baseline_end=t100)
    failure = None
    if g.require_eval_pass:
        fresh = facts.eval_gate(engine, spec, policy.deployments[row.candidate].eval_suite,
                                since=row.started_at)
        failure = fresh.failed
    agreement = None
    if g.min_live_agreement is not None:  # shadow pairs against the top tier, per arm, same windows
        ref = policy.tier_ladder()[0].value
        bw = (window.baseline_start or start, window.baseline_end or now)
        agreement = (facts.agreement_window(engine, model=row.model, deployment=row.baseline,
                                            arm=BASELINE_ARM, reference_tier=ref, start=bw[0], end=bw[1]),
                     facts.agreement_window(engine, model=row.model, deployment=row.candidate,
                                            arm=CANDIDATE_ARM, reference_tier=ref, start=start, end=now))
    return evaluate(base, cand, g, window, eval_failure=failure, agreement=agreement)


def _at(entry: dict) -> datetime:
    return datetime.fromisoformat(entry["at"])
