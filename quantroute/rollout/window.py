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
from quantroute.rollout.guards import AgreementStats, GuardVerdict, Window, evaluate


def guard_verdict(engine: Engine, row: db.Rollout, spec: CanarySpec, policy: Policy, now: datetime) -> GuardVerdict:
    g = spec.guards
    if g.judge is not None:
        return _judged(engine, row, spec, policy, now)
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
    return evaluate(base, cand, g, window, eval_failure=_eval_failure(engine, row, spec, policy),
                    agreement=_agreement(engine, row, spec, policy, window))


def _judged(engine: Engine, row: db.Rollout, spec: CanarySpec, policy: Policy, now: datetime) -> GuardVerdict:
    """The statistical judge's inputs: both arms since the current step began (the data of one always-valid
    sequence; a sliding window would restart it on every look). At 100 % the baseline gets no new sessions, so
    its sample is the whole previous step. Requests in the judge's `warmup_s` after the step began are left out."""
    judge = spec.guards.judge
    start = min(now, row.step_at + timedelta(seconds=judge.warmup_s if judge else 0))
    cand, cand_s = facts.arm_figures(engine, model=row.model, deployment=row.candidate, arm=CANDIDATE_ARM,
                                     start=start, end=now)
    window = Window(start=start, end=now)
    base, base_s = facts.arm_figures(engine, model=row.model, deployment=row.baseline, arm=BASELINE_ARM,
                                     start=start, end=now)
    if row.percent >= 100 and len(row.history) >= 2:
        bstart, bend = _at(row.history[-2]) + timedelta(seconds=judge.warmup_s if judge else 0), _at(row.history[-1])
        base, base_s = facts.arm_figures(engine, model=row.model, deployment=row.baseline, arm=BASELINE_ARM,
                                         start=bstart, end=bend)
        window = Window(start=start, end=now, baseline_start=bstart, baseline_end=bend)
    minutes = (now - start).total_seconds() / 60
    per_min = cand.requests / minutes if minutes > 0 and cand.requests else None
    return evaluate(base, cand, spec.guards, window, eval_failure=_eval_failure(engine, row, spec, policy),
                    agreement=_agreement(engine, row, spec, policy, window), samples=(base_s, cand_s),
                    steps=len(spec.steps), candidate_per_min=per_min)


def _eval_failure(engine: Engine, row: db.Rollout, spec: CanarySpec, policy: Policy) -> str | None:
    if not spec.guards.require_eval_pass:
        return None
    return facts.eval_gate(engine, spec, policy.deployments[row.candidate].eval_suite, since=row.started_at).failed


def _agreement(engine: Engine, row: db.Rollout, spec: CanarySpec, policy: Policy,
               window: Window) -> tuple[AgreementStats, AgreementStats] | None:
    """Shadow pairs against the top tier, per arm, over the same windows as the traffic figures."""
    if spec.guards.min_live_agreement is None:
        return None
    ref = policy.tier_ladder()[0].value
    start, now = window.start, window.end
    bw = (window.baseline_start or start, window.baseline_end or now)
    return (facts.agreement_window(engine, model=row.model, deployment=row.baseline, arm=BASELINE_ARM,
                                   reference_tier=ref, start=bw[0], end=bw[1]),
            facts.agreement_window(engine, model=row.model, deployment=row.candidate, arm=CANDIDATE_ARM,
                                   reference_tier=ref, start=start, end=now))


def _at(entry: dict) -> datetime:
    return datetime.fromisoformat(entry["at"])
