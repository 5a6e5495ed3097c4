"""Per-step figures of a staircase load test and the rule that stops the staircase. Pure: request results in,
pydantic models out; no clocks, no I/O.

Window accounting: a step's measured window is [start, end) after its warm-up. Requests that *started* in the
window count for latency and error figures; output tokens count by their arrival time inside the window (so a
long request that straddles the window's edge adds only what it produced inside it); req/s counts requests that
*finished* inside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, Field

from quantroute.db.loadtest import StepFigures
from quantroute.loadtest.traffic import RequestResult


class Slo(BaseModel):
    """Limits a step must meet; None = not checked."""

    p95_ms: float | None = Field(default=None, gt=0, description="End-to-end latency p95")
    ttft_p95_ms: float | None = Field(default=None, gt=0)
    max_error_rate: float = Field(default=0.01, ge=0, le=1)
    min_gain: float = Field(default=0.05, ge=0, description="A step must add at least this share of output "
                            "tok/s over the previous one, or the fleet has stopped adding throughput")


class ClassStats(BaseModel):
    """Latency of one request class (tolerant / neutral / sensitive / unlabelled) in one step."""

    requests: int
    errors: int
    e2e_p95_ms: float | None
    ttft_p95_ms: float | None
    tiers: dict[str, int]


class StepStats(StepFigures):
    """What one step of the staircase measured."""

    errors_by_status: dict[str, int] = Field(default_factory=dict)
    tiers: dict[str, int] = Field(default_factory=dict)
    nodes: dict[str, int] = Field(default_factory=dict)
    deployments: dict[str, int] = Field(default_factory=dict)
    by_class: dict[str, ClassStats] = Field(default_factory=dict)

    @property
    def load(self) -> str:
        return f"concurrency {self.concurrency}" if self.concurrency is not None else f"rate {self.rate:g}/s"


def pct(values: Sequence[float], q: float, scale: float = 1000.0) -> float | None:
    """The q-th percentile (linear interpolation) times `scale` (s -> ms), None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) * scale if len(values) else None


def _tokens_in(r: RequestResult, start: float, end: float) -> float:
    if r.token_times:
        inside = sum(1 for t in r.token_times if start <= t < end)
        # usage may count more tokens than content chunks (a chunk can carry several); spread them evenly
        return inside * (r.output_tokens / len(r.token_times)) if r.output_tokens else inside
    return r.output_tokens if r.ok and start <= r.ended < end else 0.0


def _class_stats(rs: list[RequestResult]) -> ClassStats:
    ok = [r for r in rs if r.ok]
    return ClassStats(requests=len(rs), errors=len(rs) - len(ok), e2e_p95_ms=pct([r.latency for r in ok], 95),
                      ttft_p95_ms=pct([r.ttft for r in ok if r.ttft is not None], 95),
                      tiers=dict(Counter(r.tier or "?" for r in ok)))


def summarize(results: Sequence[RequestResult], *, start: float, end: float, index: int = 0,
              concurrency: int | None = None, rate: float | None = None) -> StepStats:
    window = max(end - start, 1e-9)
    started = [r for r in results if start <= r.started < end]
    ok = [r for r in started if r.ok]
    errors = len(started) - len(ok)
    ttft = [r.ttft for r in ok if r.ttft is not None]
    itl = [b - a for r in ok for a, b in zip(r.token_times, r.token_times[1:])]
    tpot = [(r.ended - r.first_token_at) / (r.output_tokens - 1) for r in ok
            if r.first_token_at is not None and r.output_tokens > 1 and r.stream]
    e2e = [r.latency for r in ok]
    classes: dict[str, list[RequestResult]] = {}
    for r in started:
        classes.setdefault(r.request_class or "unlabelled", []).append(r)
    return StepStats(
        index=index, concurrency=concurrency, rate=rate, window_s=window, requests=len(started), errors=errors,
        error_rate=errors / len(started) if started else 0.0,
        errors_by_status=dict(Counter(str(r.status) for r in started if not r.ok)),
        req_s=sum(1 for r in results if r.ok and start <= r.ended < end) / window,
        output_tok_s=sum(_tokens_in(r, start, end) for r in results) / window,
        ttft_p50_ms=pct(ttft, 50), ttft_p95_ms=pct(ttft, 95), itl_p50_ms=pct(itl, 50), itl_p95_ms=pct(itl, 95),
        tpot_p50_ms=pct(tpot, 50), tpot_p95_ms=pct(tpot, 95),
        e2e_p50_ms=pct(e2e, 50), e2e_p95_ms=pct(e2e, 95), e2e_p99_ms=pct(e2e, 99),
        tiers=dict(Counter(r.tier for r in ok if r.tier)), nodes=dict(Counter(r.node for r in ok if r.node)),
        deployments=dict(Counter(r.deployment for r in ok if r.deployment)),
        by_class={k: _class_stats(v) for k, v in sorted(classes.items())},
    )


def breach(step: StepStats, previous: StepStats | None, slo: Slo) -> str | None:
    """Why the staircase must stop at `step`, with the figures; None when the step is fine. Checked in order:
    errors, latency SLOs, then throughput gain over the previous step."""
    if step.requests == 0:
        return "no request completed a start inside the step's window"
    if step.error_rate > slo.max_error_rate:
        return (f"error rate {step.error_rate:.1%} > {slo.max_error_rate:.1%} "
                f"({step.errors} of {step.requests} requests failed: {step.errors_by_status})")
    if slo.p95_ms is not None and step.e2e_p95_ms is not None and step.e2e_p95_ms > slo.p95_ms:
        return f"SLO: end-to-end p95 {step.e2e_p95_ms:.0f} ms > {slo.p95_ms:.0f} ms"
    if slo.ttft_p95_ms is not None and step.ttft_p95_ms is not None and step.ttft_p95_ms > slo.ttft_p95_ms:
        return f"SLO: TTFT p95 {step.ttft_p95_ms:.0f} ms > {slo.ttft_p95_ms:.0f} ms"
    if previous is not None and step.output_tok_s < previous.output_tok_s * (1 + slo.min_gain):
        gain = step.output_tok_s / previous.output_tok_s - 1 if previous.output_tok_s else 0.0
        return (f"throughput plateau: {step.output_tok_s:.0f} output tok/s at {step.load} vs "
                f"{previous.output_tok_s:.0f} at {previous.load} ({gain:+.1%}, needs >= +{slo.min_gain:.0%})")
    return None
