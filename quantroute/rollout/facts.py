"""What the rollout service reads (I/O, read-only): eval runs, the request log per arm, nodes and their
health, load-test runs. Each function returns plain values for the pure modules (guards, checklist)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from quantroute.admin_client import RouterAdmin, RouterUnavailable
from quantroute.clock import aware
from quantroute.db.engine import session as db_session
from quantroute.db.eval import REGISTERED_SOURCE as REGISTERED
from quantroute.db.eval import EvalRun
from quantroute.db.node import list_nodes
from quantroute.db.request_log import RequestLog
from quantroute.policy.model import CanarySpec, Policy
from quantroute.rollout.checklist import Fact
from quantroute.rollout.guards import AgreementStats, ArmStats, arm_sample, arm_stats
from quantroute.rollout.judge import ArmSample

COVERAGE = {"math": ("math",), "code": ("code",), "tool calling/JSON": ("json", "structured"),
            "multilingual": ("multilingual",), "long context": ("long_context",)}


@dataclass(frozen=True)
class GateState:
    """The eval gate of one candidate vs its baseline on the pinned suite."""
    passing: EvalRun | None  # the newest run on the pinned suite, when it passed
    failed: str | None  # its verdict, when it failed
    detail: str


def suite_matches(run: EvalRun, pin: str) -> bool:
    """The metadata pins a suite by name, by hash (or a hash prefix), or both as NAME@HASH."""
    name, _, digest = pin.partition("@")
    if digest:
        return run.suite_name == name and run.suite_hash.removeprefix("sha256:").startswith(
            digest.removeprefix("sha256:"))
    return pin == run.suite_name or (len(pin) >= 12 and run.suite_hash.removeprefix("sha256:").startswith(
        pin.removeprefix("sha256:")))


def eval_gate(engine: Engine, spec: CanarySpec, pin: str, *, since: datetime | None = None) -> GateState:
    """Newest finished run of the candidate vs the canary's baseline on the pinned suite decides. Only runs
    against the registered deployments count: a run whose answers came from a typed URL proves nothing about
    the artifact the fleet serves."""
    with db_session(engine) as s:
        q = (select(EvalRun).where(EvalRun.candidate_deployment == spec.candidate,
                                   EvalRun.baseline_deployment == spec.baseline, EvalRun.status == "done",
                                   EvalRun.source == REGISTERED)
             .order_by(col(EvalRun.id).desc()))
        runs = list(s.exec(q))
    if since is not None:
        runs = [r for r in runs if aware(r.created_at) >= since]
    pinned = [r for r in runs if suite_matches(r, pin)]
    if not pinned:
        others = ", ".join(f"run {r.id} on {r.suite_name!r}" for r in runs[:3])
        return GateState(None, None, f"no finished eval run of {spec.candidate} vs {spec.baseline} on the pinned "
                                     f"suite {pin!r}" + (f" (found {others})" if others else ""))
    run = pinned[0]
    if run.gate_passed:
        return GateState(run, None, f"run {run.id} on {run.suite_name} ({run.suite_hash[:19]}) passed")
    summary = "; ".join(r.get("message", "") for r in (run.verdict or {}).get("reasons", [])) or "gate failed"
    return GateState(None, f"run {run.id}: {summary}", f"run {run.id} on {run.suite_name} failed: {summary}")


def eval_coverage(run: EvalRun | None) -> Fact:
    if run is None:
        return Fact(ok=None, detail="no passing eval run yet")
    cats = {c.get("name") for c in (run.report or {}).get("categories", []) if c.get("n", 0) > 0}
    missing = [label for label, names in COVERAGE.items() if not cats & set(names)]
    if missing:
        return Fact(ok=False, detail=f"run {run.id} lacks {', '.join(missing)}")
    return Fact(ok=True, detail=f"run {run.id} covers {', '.join(COVERAGE)}")


def arm_window(engine: Engine, *, model: str, deployment: str, arm: str, start: datetime,
               end: datetime) -> ArmStats:
    """One arm's figures from the request log: only requests the router's hash put in `arm` and that the
    arm's deployment served. Requests that named the deployment themselves (arm "direct": eval runs, a client
    addressing the candidate by id) and sessions pinned before the canary (no arm) are not counted, so
    nobody can steer a guard by choosing where their own requests go."""
    return arm_stats([r[:3] for r in _arm_rows(engine, model=model, deployment=deployment, arm=arm, start=start,
                                               end=end)])


def arm_figures(engine: Engine, *, model: str, deployment: str, arm: str, start: datetime,
                end: datetime) -> tuple[ArmStats, ArmSample]:
    """Like `arm_window`, with the judge's per-request sample of the same rows."""
    rows = _arm_rows(engine, model=model, deployment=deployment, arm=arm, start=start, end=end)
    return arm_stats([r[:3] for r in rows]), arm_sample(rows)


def _arm_rows(engine: Engine, *, model: str, deployment: str, arm: str, start: datetime,
              end: datetime) -> list[tuple[int, float, float | None, int | None]]:
    with db_session(engine) as s:
        # (a stream that broke after its 200 headers is logged as a 502 by the router)
        q = select(RequestLog.status, RequestLog.latency_ms, RequestLog.ttft_ms, RequestLog.completion_tokens).where(
            RequestLog.model == model, RequestLog.deployment == deployment, RequestLog.arm == arm,
            RequestLog.ts >= start, RequestLog.ts <= end)
        return [tuple(r) for r in s.exec(q)]  # type: ignore[misc]  # rows of a multi-column select


def agreement_window(engine: Engine, *, model: str, deployment: str, arm: str, reference_tier: str, start: datetime,
                     end: datetime) -> AgreementStats:
    """One arm's shadow pairs against the reference tier (the min_live_agreement guard): like `arm_window`, only
    requests the router's hash put in `arm` count; shadow requests themselves are never in the request log."""
    from quantroute.db import shadow_pair

    n, k = shadow_pair.arm_agreement(engine, model=model, deployment=deployment, arm=arm,
                                     reference_tier=reference_tier, start=start, end=end)
    return AgreementStats(pairs=n, agree=k)


def node_facts(engine: Engine, router: RouterAdmin | None, spec: CanarySpec) -> dict[str, Fact]:
    """baseline_healthy and isolated_node, from the router when there is one, else the node table."""
    if router is not None:
        try:
            nodes = router.nodes()
            source = "router"
        except RouterUnavailable as e:
            nodes, source = None, f"router admin API unreachable ({e})"
    else:
        nodes, source = None, "no router admin API configured"
    if nodes is None:
        with db_session(engine) as s:
            nodes = [{"key": r.key, "url": r.url, "deployment": r.deployment, "healthy": None}
                     for r in list_nodes(session=s)]
    base = [n for n in nodes if n["deployment"] == spec.baseline]
    cand = [n for n in nodes if n["deployment"] == spec.candidate]
    facts: dict[str, Fact] = {}
    if not cand:
        facts["isolated_node"] = Fact(ok=None, detail=f"no node serves {spec.candidate} yet")
    else:
        shared = {n["url"] for n in cand} & {n["url"] for n in base}
        facts["isolated_node"] = Fact(ok=not shared, detail=(f"shares {', '.join(shared)} with the baseline"
                                                            if shared else f"{len(cand)} node(s) of its own"))
    healthy = [n for n in base if n["healthy"]]
    if not base:
        facts["baseline_healthy"] = Fact(ok=False, detail=f"no node serves the baseline {spec.baseline}")
    elif source != "router":
        facts["baseline_healthy"] = Fact(ok=None, detail=f"{len(base)} baseline node(s) registered, health "
                                                         f"unknown: {source}")
    else:
        facts["baseline_healthy"] = Fact(ok=bool(healthy), detail=f"{len(healthy)}/{len(base)} baseline node(s) "
                                                                 "healthy on the router")
    return facts


def staircase_fact(engine: Engine, deployment: str, target_concurrency: int | None) -> Fact:
    """A staircase run of the candidate (the load tester's `loadtest_run`) with a step that met every limit at
    the target concurrency, or at any concurrency when no target is configured."""
    from quantroute.db import loadtest

    with db_session(engine) as s:
        if target_concurrency is not None:
            run = loadtest.passed_at_concurrency(s, concurrency=target_concurrency, deployment=deployment)
            if run is None:
                return Fact(ok=False, detail=f"no staircase run of {deployment} passed at concurrency "
                                             f"{target_concurrency}; run `quantroute loadtest`")
            return Fact(ok=True, detail=f"load test run {run.id} met every limit up to concurrency "
                                        f"{run.max_ok_concurrency}")
        run = loadtest.latest_run(s, deployment=deployment)
    if run is None:
        return Fact(ok=False, detail=f"no staircase run of {deployment}; run `quantroute loadtest`")
    if run.max_ok_concurrency is None and run.max_ok_rate is None:
        return Fact(ok=False, detail=f"load test run {run.id}: no step met the limits ({run.stop_reason})")
    reached = (f"concurrency {run.max_ok_concurrency}" if run.max_ok_concurrency is not None
               else f"{run.max_ok_rate:g} req/s")
    return Fact(ok=True, detail=f"load test run {run.id} met every limit up to {reached} (no target set)")


def metadata_fact(policy: Policy, deployment: str, missing: tuple[str, ...]) -> Fact:
    if missing:
        return Fact(ok=False, detail=f"missing {', '.join(missing)}")
    m = policy.deployments[deployment]
    return Fact(ok=True, detail=f"{m.checksum}, {m.format}/{m.method}, calibration {m.calibration_set}")


def guards_fact(spec: CanarySpec) -> Fact:
    g = spec.guards
    gradual = len(spec.steps) >= 2 and spec.steps[0] <= 25
    if g.judge is not None:
        j = g.judge
        limits = ", ".join(f"{m.metric} {'+' if m.metric != 'error_rate' else ''}"
                           + (f"{100 * m.allowed:g} %" if m.metric != "error_rate" else f"+{100 * m.allowed:g} pts")
                           + ("" if m.critical else " (non-critical)") for m in j.metrics)
        detail = (f"statistical judge at {100 * j.confidence:g} % confidence, power {100 * j.power:g} %: {limits}; "
                  f"steps {', '.join(f'{s:g}%' for s in spec.steps)}")
    else:
        detail = (f"errors <= {g.max_error_rate:.1%}, p95 <= {g.max_p95_latency_ratio:g}x, TTFT <= "
                  f"{g.max_ttft_ratio:g}x over {g.window_s}s (min {g.min_requests} requests); steps "
                  f"{', '.join(f'{s:g}%' for s in spec.steps)}")
    if g.min_live_agreement is not None:
        la = g.min_live_agreement
        detail += (f"; live agreement with the top tier at most {100 * la.max_drop:g} points below the baseline's "
                   f"(min {la.min_pairs} shadow pairs)")
    return Fact(ok=gradual, detail=detail if gradual else detail + " - not gradual (first step above 25%)")
