"""support.fleet_limits: what the fleet experiment's page says limits its figures, read from its runs (pure)."""

from __future__ import annotations

from quantroute.loadtest.stats import Slo
from support.fleet_capacity import CapacityResult, Invariants, StepResult
from support.fleet_limits import reading_notes

LABELS = {"a": "(a) 8 FP16", "b": "(b) 4+4 tiered", "b'": "(b') 4+4 spill", "d": "(d) 4+4 blind"}


def step(conc: int, tok_s: float, *, tpot: float, fp16: float) -> StepResult:
    return StepResult(concurrency=conc, windows=[], output_tok_s=tok_s, tok_s_by_tier={}, ttft_p95_ms=100.0,
                      e2e_p95_ms=None, by_class={}, requests=100, errors=0, errors_by_status={},
                      tier_share={"fp16": fp16, "int4": 1 - fp16}, tpot_p95_ms=tpot)


def run(tops: list[float], *, fp16: float = 0.4, need: float = 0.4, waits: int = 100, pinned_503: int = 0,
        stop: str = "climb stopped: throughput plateau") -> CapacityResult:
    steps = [step(64 * (i + 1), t, tpot=20.0 + 20 * i, fp16=fp16) for i, t in enumerate(tops)]
    return CapacityResult(name="x", label="x", time_scale=8, slo=Slo(max_error_rate=0.01), steps=steps,
                          capacity_index=len(steps) - 1, stop_reason=stop, needed_fp16_share=need,
                          fleet_warning=False, pinned_waits=waits, pinned_503=pinned_503, cut_requests=0,
                          invariants=Invariants(sessions=0, mid_session_switches=0, sensitive=0, sensitive_on_int4=0,
                                                sensitive_on_int4_pinned=0, sensitive_on_int4_unpinned=0))


def test_arms_that_flatten_at_one_rate_are_named_as_the_machines_ceiling_with_the_columns_below_it():
    out = {"labels": LABELS, "arms": {"a": [run([10_000, 15_000, 19_000])] * 3,
                                      "d": [run([14_000, 17_000, 20_000])] * 3}}
    notes = reading_notes(out)
    assert "The climbs of (a), (d) flattened between 19,000 and 20,000 output tok/s" in notes
    # TPOT p95 30 ms is crossed half-way from the first step to the second: 12,500 and 15,500, under 0.85 x 19,000
    assert "compare the machine, not the arms; TPOT p95 <= 30 ms sit below it" in notes
    apart = {"labels": LABELS, "arms": {"a": [run([10_000, 12_000, 13_000])] * 3,
                                        "d": [run([14_000, 17_000, 20_000])] * 3}}
    assert "ceiling" not in reading_notes(apart)  # 12,000 against 20,000: the fleets differ, not the machine


def test_the_floors_bound_and_the_cost_of_spilled_pins_come_from_the_runs():
    errors = "error rate 3.6% > 1.0% (5 of 138 requests failed) at concurrency 524"
    out = {"labels": LABELS, "arms": {
        "b": [run([9_000, 12_000], need=0.47, waits=1_000)] * 3,
        "b'": [run([9_000, 11_000], need=0.47, waits=1_400, pinned_503=5, stop=errors)] * 3,
        "d": [run([14_000, 20_000], fp16=0.33)] * 3}}
    notes = reading_notes(out)
    assert "keep 47% of the requests on FP16" in notes and "(d) put 33% there" in notes
    assert "once (b') serves 70% of (d)'s load" in notes
    assert "(b') had 1,400 pinned turns wait for a node (median per run; 5 got a 503) against 1,000 (0)" in notes
    assert "3 of its 3 climbs stopped on the error limit against 0 of 3" in notes
    calm = {**out, "arms": {**out["arms"], "b'": [run([9_000, 11_000], need=0.47, waits=900)] * 3}}
    assert "Spill and pins" not in reading_notes(calm)  # no more waits than (b): nothing to say
