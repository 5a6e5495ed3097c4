"""Capacity under several SLOs from one staircase (pure): a staircase records every step's throughput and latency
percentiles, so the capacity under a latency SLO is the best step before the first one that breaks it, without
climbing again for each SLO.

Latency-bound SLOs (p95 TPOT, p95 TTFT) favour the tier that is fast at small batches; the throughput-bound one
(`THROUGHPUT`: no latency limit beyond the staircase's own ceiling) is where the fleet's batch capacity decides.
"""

from __future__ import annotations

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


def capacities(result: CapacityResult, slos: Sequence[LatencySlo] = SLOS) -> dict[str, float]:
    """SLO name -> capacity in output tok/s (0 when even the first step breaks it)."""
    out = {}
    for slo in slos:
        st = capacity_under(result, slo)
        out[slo.name] = st.output_tok_s if st is not None else 0.0
    return out
