"""Capacity under several SLOs from one staircase (pure): a staircase records every step's throughput and latency
percentiles, so the capacity under a latency SLO comes from the steps before the first one that breaks it (and
the crossing into that one), without climbing again for each SLO.

Latency-bound SLOs (p95 TPOT, p95 TTFT) favour the tier that is fast at small batches; the throughput-bound one
(`THROUGHPUT`: no latency limit beyond the staircase's own ceiling) is where the fleet's batch capacity decides.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel

from support.fleet_capacity import CapacityResult, StepResult


class LatencySlo(BaseModel):
    """Limits on a step's p95s (simulated ms); None = not limited. Errors are always limited by the staircase's
    own max_error_rate."""

    name: str
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None

    def breaks(self, step: StepResult) -> bool:
        """A step without the figure (no streamed request finished in it) does not break the limit."""
        return ((self.tpot_p95_ms is not None and step.tpot_p95_ms is not None
                 and step.tpot_p95_ms > self.tpot_p95_ms)
                or (self.ttft_p95_ms is not None and step.ttft_p95_ms is not None
                    and step.ttft_p95_ms > self.ttft_p95_ms))


THROUGHPUT = LatencySlo(name="throughput-bound")
TTFT_REFERENCE = "TTFT p95 <= 1 s"  # the project's default SLO (the load tester's, the old experiment's)
SLOS: tuple[LatencySlo, ...] = (
    LatencySlo(name="TPOT p95 <= 30 ms", tpot_p95_ms=30), LatencySlo(name="TPOT p95 <= 50 ms", tpot_p95_ms=50),
    LatencySlo(name="TPOT p95 <= 100 ms", tpot_p95_ms=100), LatencySlo(name="TTFT p95 <= 0.5 s", ttft_p95_ms=500),
    LatencySlo(name=TTFT_REFERENCE, ttft_p95_ms=1000), THROUGHPUT)


def capacity_under(result: CapacityResult, slo: LatencySlo) -> StepResult | None:
    """The step with the most output tok/s before the first step that breaks `slo` or the error limit."""
    best: StepResult | None = None
    limit = result.slo.max_error_rate
    for st in result.steps:
        if st.requests == 0 or st.errors / st.requests > limit or slo.breaks(st):
            break
        if best is None or st.output_tok_s > best.output_tok_s:
            best = st
    return best


def _limits(slo: LatencySlo, step: StepResult) -> list[tuple[float, float | None]]:
    return [(lim, val) for lim, val in ((slo.tpot_p95_ms, step.tpot_p95_ms), (slo.ttft_p95_ms, step.ttft_p95_ms))
            if lim is not None]


def capacity_at(result: CapacityResult, slo: LatencySlo) -> float:
    """Output tok/s at `slo`: the best step that held, or, where the step after the last one that held broke only
    the latency limit and served more, the point between the two where the p95 crosses the limit (linear in
    both). A staircase's steps are a factor apart, so the best held step alone reads up to that factor low, by
    where the steps happen to fall. 0 when even the first step breaks it."""
    best = capacity_under(result, slo)
    if best is None:
        return 0.0
    limit = result.slo.max_error_rate
    for i, st in enumerate(result.steps):
        if st.requests == 0 or st.errors / st.requests > limit:
            return best.output_tok_s
        if slo.breaks(st):
            if i == 0:
                return best.output_tok_s
            held = result.steps[i - 1]
            if st.output_tok_s <= held.output_tok_s:
                return best.output_tok_s
            f = min(((lim - h) / (b - h) for (lim, b), (_, h) in zip(_limits(slo, st), _limits(slo, held))
                     if b is not None and h is not None and b > lim), default=0.0)
            return max(best.output_tok_s, held.output_tok_s + max(0.0, min(1.0, f)) * (st.output_tok_s
                                                                                        - held.output_tok_s))
    return best.output_tok_s


def capacities(result: CapacityResult, slos: Sequence[LatencySlo] = SLOS) -> dict[str, float]:
    """SLO name -> capacity in output tok/s at that SLO (`capacity_at`)."""
    return {slo.name: capacity_at(result, slo) for slo in slos}


def median_capacity(runs: Sequence[CapacityResult], slo: str) -> float:
    """An arm's median capacity under the SLO named `slo` over its runs (0 without runs)."""
    by_name = {s.name: s for s in SLOS}
    return statistics.median(capacity_at(r, by_name[slo]) for r in runs) if runs else 0.0
