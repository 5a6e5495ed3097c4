"""One arm of the fleet experiment: a fleet, a policy and a traffic mix behind the router, and its *capacity*: the
highest aggregate output tok/s it sustains while p95 TTFT stays within an SLO (benchmarks/fleet_mix.py).

Why capacity and not throughput at one fixed concurrency: in a closed loop at a fixed client count, slow nodes
hold clients, so such a comparison measures latency as much as capacity (a fleet with extra but slower nodes can
look worse than not using them). Here each arm climbs a staircase of concurrency until the SLO (or the error
limit) breaks, and the arm's figure is its best step that held.

The staircase is one continuous closed loop: each step adds clients (a new replay, rotated through the traffic so
the added clients do not replay the same units in lockstep), waits a warm-up, then measures `windows` back-to-back
windows; a step's figures are the median over its windows (the repeats). Output tok/s comes from the nodes'
own generation counters (exact, including requests still running) over each node's own simulated clock, so a
host stall the engines forgave (eight nodes, the router and the clients share a small machine) does not read as
lost capacity; each step reports the share of its wall time the nodes simulated. Latency comes from the
requests that started in the window, evaluated after the final drain, so slow requests are never left out. The
staircase stops at the first step whose already-finished requests break a limit (this online check can only miss
a breach, never invent one); the final verdict re-checks every step with all requests in.

Figures are converted to the simulator's clock (tok/s x time_scale, ms / time_scale), so they read as what the
capacity model predicts for the real hardware. They come from the simulator's model, not from a GPU.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import httpx
from pydantic import BaseModel, Field

from quantroute.fleet import Fleet
from quantroute.loadtest.stack import FleetStack, fleet_stack
from quantroute.loadtest.stats import Slo, StepStats, breach, summarize
from quantroute.loadtest.traffic import RequestResult, TrafficLine, replay, units
from quantroute.policy.model import Policy
from quantroute.quality_cost import request_category, served_counts
from support.fleet_arms import top_tier_share
from support.fleet_scrape import (
    PREFIX_HITS,
    PREFIX_QUERIES,
    NodeSpan,
    node_counters,
    node_spans,
    node_tokens,
    router_counters,
    settle,
)


class Invariants(BaseModel):
    """What must hold whatever the load (pins and tier floors), from the client's view of each response."""

    sessions: int
    mid_session_switches: int  # sessions whose successful turns ran on more than one tier
    sensitive: int
    sensitive_on_int4: int
    sensitive_on_int4_pinned: int  # a later turn kept on int4 by a session that started tolerant
    sensitive_on_int4_unpinned: int  # the classifier's own choice (single requests and first turns)


class Ladder(BaseModel):
    """The concurrency staircase and its timing (wall clock)."""

    start: int = Field(default=160, ge=1)
    factor: float = Field(default=1.3, gt=1)
    max_steps: int = Field(default=8, ge=1)
    queue_stop: float = Field(default=0.1, ge=0, description="Stop climbing after a step in which this share of "
                              "requests waited at the router for a node (or got a 503): the queue has begun, so "
                              "TTFT is about to break; results of those requests arrive too late to check online")
    first_warmup_s: float = Field(default=4.0, ge=0, description="Before the first step (all clients start at once)")
    warmup_s: float = Field(default=2.0, ge=0, description="After each step's added clients start")
    window_s: float = Field(default=3.0, gt=0)
    windows: int = Field(default=2, ge=1, description="Measured windows per step; the step reports their median")
    drain_s: float = Field(default=12.0, ge=0, description="Longest wait for in-flight requests at the end")
    settle_s: float = Field(default=120.0, ge=0, description="Longest wait, before a run, for the nodes to finish "
                            "what an earlier run left running (their tokens would count in this run's first step)")
    plateau_steps: int = Field(default=0, ge=0, description="Stop after this many steps in a row that add less "
                               "than the SLO's min_gain over the best step so far (0: no plateau rule)")

    def values(self) -> list[int]:
        out: list[int] = []
        c = float(self.start)
        while len(out) < self.max_steps:
            v = int(round(c / 4) * 4) or 1  # multiples of 4 read better in a table
            if not out or v > out[-1]:
                out.append(v)
            c *= self.factor
        return out


class MeasuredWindow(BaseModel):
    """One measured window of a step (simulated clock)."""

    output_tok_s: float  # per node, tokens over the simulated seconds the node lived through; summed
    # simulated seconds the nodes lived through over the window's wall time / time scale (median node): below 1,
    # the host stalled and the engines forgave it; a wall-clock rate would have read that much low
    sim_share: float | None = None
    tok_s_by_tier: dict[str, float]
    requests: int
    errors: int
    ttft_p95_ms: float | None
    e2e_p95_ms: float | None
    ttft_p50_ms: float | None = None
    tpot_p95_ms: float | None = None


class StepResult(BaseModel):
    """One concurrency of the staircase: medians over its windows (simulated clock)."""

    concurrency: int
    windows: list[MeasuredWindow]
    output_tok_s: float
    tok_s_by_tier: dict[str, float]
    ttft_p95_ms: float | None
    e2e_p95_ms: float | None
    by_class: dict[str, dict]  # class -> requests, e2e_p95_ms, ttft_p95_ms, tiers (medians; requests summed)
    requests: int
    errors: int
    errors_by_status: dict[str, int]
    tier_share: dict[str, float]
    breach: str | None = None
    ttft_p50_ms: float | None = None
    tpot_p95_ms: float | None = None  # time per output token after the first, streamed requests
    sim_share: float | None = None  # median over windows (MeasuredWindow.sim_share)


class CapacityResult(BaseModel):
    name: str
    label: str
    time_scale: float
    slo: Slo
    steps: list[StepResult]
    capacity_index: int | None  # the held step with the most output tok/s, before the first breach
    stop_reason: str | None
    needed_fp16_share: float  # what the traffic needs under the policy (classifier alone)
    fleet_warning: bool
    pinned_waits: int  # requests that waited at the router for a node of their tier (whole staircase)
    pinned_503: int
    cut_requests: int  # still running after the drain; their tokens count, their latency does not
    invariants: Invariants  # over every request of the staircase, at every load
    # what served the traffic over the whole staircase: eval category -> tier -> requests, and request class
    # (tolerant / neutral / sensitive) -> tier -> requests; tiers are the nodes' real ones
    served: dict[str, dict[str, int]] = Field(default_factory=dict)
    class_tiers: dict[str, dict[str, int]] = Field(default_factory=dict)
    prefix_queries: float = 0.0  # the nodes' prefix-cache counters over the staircase (tokens)
    prefix_hits: float = 0.0

    @property
    def prefix_hit_rate(self) -> float | None:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else None

    @property
    def capacity(self) -> StepResult | None:
        return None if self.capacity_index is None else self.steps[self.capacity_index]

    @property
    def capacity_tok_s(self) -> float:
        return self.capacity.output_tok_s if self.capacity else 0.0


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


def rotated(traffic: Sequence[TrafficLine], k: int) -> list[TrafficLine]:
    """The traffic starting at another unit (sessions kept whole), so clients added by each step do not replay
    the same units in lockstep with the earlier ones."""
    us = units(traffic)
    shift = (k * 37) % len(us) if us else 0
    return [ln for u in us[shift:] + us[:shift] for ln in u.lines]


def _median(values: Sequence[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def _ms(v: float | None, ts: float) -> float | None:
    return None if v is None else v / ts


def _window(stats: StepStats, spans: dict[str, NodeSpan], node_tier: dict[str, str], ts: float) -> MeasuredWindow:
    """Each node's rate is over its own simulated clock: an engine that forgave a host stall simulated less time
    in the window, and its tokens are divided by the time it simulated, not by the wall clock's."""
    by_tier: dict[str, float] = defaultdict(float)
    wall_sim_s = stats.window_s / ts
    for node, sp in spans.items():
        by_tier[node_tier[node]] += sp.tokens / (sp.sim_s if sp.sim_s > 0 else wall_sim_s)
    shares = [sp.sim_s / wall_sim_s for sp in spans.values()] if wall_sim_s > 0 else []
    return MeasuredWindow(output_tok_s=sum(by_tier.values()), tok_s_by_tier=dict(sorted(by_tier.items())),
                          sim_share=statistics.median(shares) if shares else None,
                          requests=stats.requests, errors=stats.errors, ttft_p95_ms=_ms(stats.ttft_p95_ms, ts),
                          e2e_p95_ms=_ms(stats.e2e_p95_ms, ts), ttft_p50_ms=_ms(stats.ttft_p50_ms, ts),
                          tpot_p95_ms=_ms(stats.tpot_p95_ms, ts))


def step_result(concurrency: int, spans: Sequence[tuple[float, float, dict[str, NodeSpan]]],
                results: Sequence[RequestResult], node_tier: dict[str, str], ts: float) -> StepResult:
    """A step's figures from its windows (start, end, tokens per node in the window); medians over windows."""
    stats = [summarize(results, start=s, end=e) for s, e, _ in spans]
    wins = [_window(st, tok, node_tier, ts) for st, (_, _, tok) in zip(stats, spans)]
    classes = sorted({c for st in stats for c in st.by_class})
    by_class = {}
    for c in classes:
        cs = [st.by_class[c] for st in stats if c in st.by_class]
        tiers: dict[str, int] = defaultdict(int)
        for x in cs:
            for t, n in x.tiers.items():
                tiers[t] += n
        by_class[c] = {"requests": sum(x.requests for x in cs),
                       "e2e_p95_ms": _ms(_median([x.e2e_p95_ms for x in cs]), ts),
                       "ttft_p95_ms": _ms(_median([x.ttft_p95_ms for x in cs]), ts), "tiers": dict(tiers)}
    tiers_all: dict[str, int] = defaultdict(int)
    status: dict[str, int] = defaultdict(int)
    for st in stats:
        for t, n in st.tiers.items():
            tiers_all[t] += n
        for s, n in st.errors_by_status.items():
            status[s] += n
    ok = sum(tiers_all.values()) or 1
    tier_names = sorted({t for w in wins for t in w.tok_s_by_tier})
    return StepResult(
        concurrency=concurrency, windows=wins, output_tok_s=_median([w.output_tok_s for w in wins]) or 0.0,
        tok_s_by_tier={t: _median([w.tok_s_by_tier.get(t, 0.0) for w in wins]) or 0.0 for t in tier_names},
        ttft_p95_ms=_median([w.ttft_p95_ms for w in wins]), e2e_p95_ms=_median([w.e2e_p95_ms for w in wins]),
        by_class=by_class, requests=sum(w.requests for w in wins), errors=sum(w.errors for w in wins),
        errors_by_status=dict(status), tier_share={t: n / ok for t, n in sorted(tiers_all.items())},
        ttft_p50_ms=_median([w.ttft_p50_ms for w in wins]), tpot_p95_ms=_median([w.tpot_p95_ms for w in wins]),
        sim_share=_median([w.sim_share for w in wins]))


def verdict(step: StepResult, slo: Slo) -> str | None:
    """The load tester's breach rule on a step's medians (no plateau rule: noise would stop a climb early)."""
    med = StepStats(index=0, concurrency=step.concurrency, window_s=1.0, requests=step.requests,
                    errors=step.errors, error_rate=step.errors / step.requests if step.requests else 0.0,
                    errors_by_status=step.errors_by_status, req_s=0.0, output_tok_s=step.output_tok_s,
                    ttft_p95_ms=step.ttft_p95_ms, e2e_p95_ms=step.e2e_p95_ms)
    return breach(med, None, slo)


async def climb(stack: FleetStack, *, name: str, label: str, policy: Policy, traffic: Sequence[TrafficLine],
                ladder: Ladder, slo: Slo, time_scale: float, distinct_prompts: bool = True) -> CapacityResult:
    """The staircase for one traffic mix on a running stack (see the module docstring). `distinct_prompts`: every
    replay of a unit opens with its own system message, so the prefix cache never serves one replay's prompt
    to another (real conversations differ; only a session's own turns share a prefix)."""
    node_tier = {n.id: n.deployment.tier.value for n in stack.fleet.nodes}
    results: list[RequestResult] = []
    stops: list[asyncio.Event] = []
    tasks: list[asyncio.Task] = []
    raw: list[tuple[int, list[tuple[float, float, dict[str, NodeSpan]]]]] = []
    running = 0
    queue_note: str | None = None
    best_tok_s, flat = 0.0, 0
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=2048)
    # Scrapes use their own client, so they never queue behind (or share a reset connection with) the load.
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0, connect=10.0), limits=limits) as client, \
            httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0)) as scraper:
        if busy := await settle(scraper, stack.node_urls, ladder.settle_s):
            raise RuntimeError(f"{name}: {busy} request(s) still on the nodes after {ladder.settle_s:.0f} s "
                               "(settle_s); a run measured now would count their tokens")
        before = mark = await router_counters(scraper, stack.router_url)
        counters0 = await node_counters(scraper, stack.node_urls)
        for k, conc in enumerate(ladder.values()):
            stop = asyncio.Event()
            stops.append(stop)
            tasks.append(asyncio.create_task(replay(
                stack.router_url, rotated(traffic, k), stop_event=stop, on_result=results.append,
                concurrency=conc - running, client=client, run_id=f"{name}-{k}-{time.monotonic_ns() % 10**6}",
                seed=k, distinct_prompts=distinct_prompts)))
            running = conc
            await asyncio.sleep(ladder.first_warmup_s if k == 0 else ladder.warmup_s)
            spans = []
            for _ in range(ladder.windows):
                t0, c0 = time.perf_counter(), await node_tokens(scraper, stack.node_urls)
                await asyncio.sleep(ladder.window_s)
                t1, c1 = time.perf_counter(), await node_tokens(scraper, stack.node_urls)
                spans.append((t0, t1, node_spans(c0, c1)))
            raw.append((conc, spans))
            # Online check on the requests finished so far; unfinished ones are the slow ones, so this can
            # miss a breach but not invent one. The router's wait and 503 counters see the queue at once.
            now = await router_counters(scraper, stack.router_url)
            routed = max(now["requests"] - mark["requests"], 1.0)
            queued = (now["waits"] - mark["waits"] + now["no_capacity"] - mark["no_capacity"]) / routed
            mark = now
            current = step_result(conc, spans, results, node_tier, time_scale)
            if verdict(current, slo) is not None:
                break
            flat = flat + 1 if current.output_tok_s < best_tok_s * (1 + slo.min_gain) else 0
            best_tok_s = max(best_tok_s, current.output_tok_s)
            if ladder.plateau_steps and flat >= ladder.plateau_steps:
                queue_note = (f"climb stopped after concurrency {conc}: {flat} step(s) in a row added less than "
                              f"{slo.min_gain:.0%} over the best (throughput plateau)")
                break
            if queued >= ladder.queue_stop:
                queue_note = (f"climb stopped after concurrency {conc}: {queued:.0%} of its requests waited at the "
                              "router (queue begun)")
                break
            if any(t.done() and t.exception() for t in tasks):
                break
        for s in stops:
            s.set()
        done, pending = await asyncio.wait(tasks, timeout=ladder.drain_s)
        cut = len(pending)
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in done:
            if (error := t.exception()) is not None:
                raise error
        after = await router_counters(scraper, stack.router_url)
        counters1 = await node_counters(scraper, stack.node_urls)
    for r in results:  # the nodes' real tiers (a router view may label them otherwise: the precision-blind arm)
        if r.node in node_tier:
            r.tier = node_tier[r.node]
    steps = [step_result(c, sp, results, node_tier, time_scale) for c, sp in raw]
    best = stop_reason = None
    for i, st in enumerate(steps):
        st.breach = verdict(st, slo)
        if st.breach is not None:
            stop_reason = f"{st.breach} at concurrency {st.concurrency}"
            break
        if best is None or st.output_tok_s > steps[best].output_tok_s:
            best = i
    if stop_reason is None:
        stop_reason = queue_note or (f"top of the ladder ({steps[-1].concurrency}) held the SLO: capacity is at "
                                     "least this")
    share, warn = top_tier_share(policy, traffic)
    return CapacityResult(
        name=name, label=label, time_scale=time_scale, slo=slo, steps=steps, capacity_index=best,
        stop_reason=stop_reason, needed_fp16_share=share, fleet_warning=warn,
        pinned_waits=int(after["waits"] - before["waits"]), pinned_503=int(after["pinned_503"] - before["pinned_503"]),
        cut_requests=cut, invariants=invariants(results),
        served=served_counts((request_category(r.line.body), r.tier) for r in results if r.ok and r.tier and r.line),
        class_tiers=served_counts((r.request_class or "unlabelled", r.tier) for r in results if r.ok and r.tier),
        prefix_queries=sum(counters1[n][PREFIX_QUERIES] - counters0[n][PREFIX_QUERIES] for n in counters1),
        prefix_hits=sum(counters1[n][PREFIX_HITS] - counters0[n][PREFIX_HITS] for n in counters1))


def run_capacity(fleet: Fleet, policy: Policy, runs: Sequence[tuple[str, str, Sequence[TrafficLine]]], *,
                 ladder: Ladder, slo: Slo, time_scale: float, node_max_waiting: int = 2,
                 router_view: Callable[[Fleet], Fleet] | None = None, distinct_prompts: bool = True,
                 **router_settings) -> list[CapacityResult]:
    """Start the fleet and a router with `policy` once, then climb the staircase for each (name, label, traffic).
    `router_view` changes the fleet file the router reads (not the nodes); `router_settings` are RouterSettings
    fields (node_affinity, say)."""
    # The router's waits run on the wall clock; scale them so a pinned session waits as long in simulated time
    # as the policy says.
    sessions = policy.sessions.model_copy(update={"max_wait_ms": int(policy.sessions.max_wait_ms * time_scale)})
    # Likewise the SLO spill aims at: the router observes wall-clock TPOT and TTFT, time_scale times the simulated
    spill = policy.spill.model_copy(update={k: getattr(policy.spill, k) * time_scale
                                            for k in ("tpot_p95_ms", "ttft_p95_ms") if getattr(policy.spill, k)})
    policy = policy.model_copy(update={"sessions": sessions, "spill": spill})

    async def go(stack: FleetStack) -> list[CapacityResult]:
        return [await climb(stack, name=n, label=lb, policy=policy, traffic=t, ladder=ladder, slo=slo,
                            time_scale=time_scale, distinct_prompts=distinct_prompts) for n, lb, t in runs]

    # A node counts as full for the router when its batch is full (max_num_seqs) or requests queue inside it
    # (it ran out of KV room: the RTX 4090 nodes do long before 64 sequences), so load beyond that waits at
    # the router (pinned sessions) or escalates to a higher tier (unpinned) instead of queueing unseen.
    inflight = min(n.max_num_seqs for n in fleet.nodes)
    with fleet_stack(fleet, policy, time_scale=time_scale, node_max_inflight=inflight,
                     node_max_waiting=node_max_waiting, router_view=router_view, **router_settings) as stack:
        return asyncio.run(go(stack))
