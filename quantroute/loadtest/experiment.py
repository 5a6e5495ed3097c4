"""One arm of the fleet experiment: a fleet, a policy and a traffic mix, run closed-loop behind the router, with
the figures and invariants the experiment reports (benchmarks/fleet_mix.py).

Figures are converted to the simulator's clock (tok/s x time_scale, ms / time_scale), so they read as what the
capacity model predicts for the real hardware and do not depend on the time scale chosen to fit the run on this
machine. They come from the simulator's model, not from a GPU.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import BaseModel

from quantroute.fleet import Fleet
from quantroute.loadtest.arms import top_tier_share
from quantroute.loadtest.runner import LoadTestConfig, run_step
from quantroute.loadtest.stack import Stack, fleet_stack
from quantroute.loadtest.stats import StepStats
from quantroute.policy.model import Policy
from quantroute.traffic import RequestResult, TrafficLine


class Invariants(BaseModel):
    """What must hold whatever the load (pins and tier floors), from the client's view of each response."""

    sessions: int
    mid_session_switches: int  # sessions whose successful turns ran on more than one tier
    sensitive: int
    sensitive_on_int4: int
    sensitive_on_int4_pinned: int  # a later turn kept on int4 by a session that started tolerant
    sensitive_on_int4_unpinned: int  # the classifier's own choice (single requests and first turns)


class ArmResult(BaseModel):
    name: str
    label: str
    concurrency: int
    time_scale: float
    requests: int
    errors: int
    output_tok_s: float  # simulated clock
    e2e_p95_ms: float | None
    ttft_p95_ms: float | None
    by_class: dict[str, dict]  # class -> requests, e2e_p95_ms, ttft_p95_ms, tiers
    tier_share: dict[str, float]  # where requests ran
    needed_fp16_share: float  # what the traffic needs under the policy (classifier alone)
    fleet_warning: bool
    pinned_waits: int  # requests that waited for capacity (router counter, warm-up included)
    pinned_503: int
    invariants: Invariants


def invariants(results: Sequence[RequestResult]) -> Invariants:
    by_session: dict[str, list[RequestResult]] = defaultdict(list)
    for r in results:
        if r.session is not None and r.ok:
            by_session[r.session].append(r)
    first_tier = {s: min(rs, key=lambda r: r.turn).tier for s, rs in by_session.items()}
    switches = sum(1 for rs in by_session.values() if len({r.tier for r in rs}) > 1)
    sens = [r for r in results if r.ok and r.request_class == "sensitive"]
    on4 = [r for r in sens if r.tier == "int4"]
    pinned = [r for r in on4 if r.session is not None and r.turn > 1 and first_tier.get(r.session) == "int4"]
    return Invariants(sessions=len(by_session), mid_session_switches=switches, sensitive=len(sens),
                      sensitive_on_int4=len(on4), sensitive_on_int4_pinned=len(pinned),
                      sensitive_on_int4_unpinned=len(on4) - len(pinned))


async def router_counters(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    """Session waits and pinned 503s from the router's Prometheus metrics."""
    text = (await client.get(url + "/metrics")).text
    out = {"waits": 0.0, "pinned_503": 0.0}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "quantroute_session_waits_total":
                out["waits"] += s.value
            elif s.name == "quantroute_no_capacity_total" and s.labels.get("pinned") == "true":
                out["pinned_503"] += s.value
    return out


def _scaled(step: StepStats, ts: float) -> dict:
    def ms(v: float | None) -> float | None:
        return None if v is None else v / ts
    return {k: {"requests": c.requests, "e2e_p95_ms": ms(c.e2e_p95_ms), "ttft_p95_ms": ms(c.ttft_p95_ms),
                "tiers": c.tiers} for k, c in step.by_class.items()}


async def run_arm(stack: Stack, *, name: str, label: str, policy: Policy, traffic: Sequence[TrafficLine],
                  concurrency: int, time_scale: float, seconds: float, warmup_s: float) -> ArmResult:
    config = LoadTestConfig(url=stack.router_url, model=traffic[0].body["model"], staircase=[concurrency],
                            step_seconds=seconds, warmup_seconds=warmup_s, drain_seconds=max(10.0, seconds))
    results: list[RequestResult] = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0),
                                 limits=httpx.Limits(max_connections=None)) as client:
        before = await router_counters(client, stack.router_url)
        step = await run_step(config, traffic, 0, client=client, results=results)
        after = await router_counters(client, stack.router_url)
    ok = sum(step.tiers.values()) or 1
    share, warn = top_tier_share(policy, traffic)
    return ArmResult(
        name=name, label=label, concurrency=concurrency, time_scale=time_scale, requests=step.requests,
        errors=step.errors, output_tok_s=step.output_tok_s * time_scale,
        e2e_p95_ms=None if step.e2e_p95_ms is None else step.e2e_p95_ms / time_scale,
        ttft_p95_ms=None if step.ttft_p95_ms is None else step.ttft_p95_ms / time_scale,
        by_class=_scaled(step, time_scale), tier_share={t: n / ok for t, n in sorted(step.tiers.items())},
        needed_fp16_share=share, fleet_warning=warn, pinned_waits=int(after["waits"] - before["waits"]),
        pinned_503=int(after["pinned_503"] - before["pinned_503"]), invariants=invariants(results))


def run_arms(fleet: Fleet, policy: Policy, runs: Sequence[tuple[str, str, Sequence[TrafficLine]]], *,
             concurrency: int, time_scale: float, seconds: float, warmup_s: float,
             node_max_inflight: int | None = None) -> list[ArmResult]:
    """Start the fleet and a router with `policy` once, then run each (name, label, traffic) in turn."""
    inflight = node_max_inflight or min(n.max_num_seqs for n in fleet.nodes)

    async def go(stack: Stack) -> list[ArmResult]:
        return [await run_arm(stack, name=n, label=lb, policy=policy, traffic=t, concurrency=concurrency,
                              time_scale=time_scale, seconds=seconds, warmup_s=warmup_s) for n, lb, t in runs]

    # A node counts as full for the router when its batch is full (max_num_seqs), so load beyond it waits at
    # the router (pinned sessions) or escalates (unpinned) instead of queueing unseen inside one node.
    with fleet_stack(fleet, policy, time_scale=time_scale, node_max_inflight=inflight) as stack:
        return asyncio.run(go(stack))
