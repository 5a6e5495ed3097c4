"""Guards: pass, a breach per guard (named, with figures), inconclusive below the minimum sample."""

from __future__ import annotations

import pytest

from quantroute.policy.model import Guards
from quantroute.rollout.guards import ArmStats, arm_stats, evaluate, percentile

G = Guards(max_error_rate=0.02, max_p95_latency_ratio=1.5, max_ttft_ratio=1.5, min_requests=50)
BASE = ArmStats(requests=400, errors=2, p95_latency_ms=200, p95_ttft_ms=40)


def test_pass():
    v = evaluate(BASE, ArmStats(requests=60, errors=1, p95_latency_ms=240, p95_ttft_ms=50), G)
    assert v.status == "pass" and not v.breaches
    assert "1.20x" in v.summary


@pytest.mark.parametrize("cand,guard,figure", [
    (ArmStats(requests=100, errors=5, p95_latency_ms=200, p95_ttft_ms=40), "error_rate", "5.0%"),
    (ArmStats(requests=100, errors=0, p95_latency_ms=420, p95_ttft_ms=40), "p95_latency_ratio", "2.10x"),
    (ArmStats(requests=100, errors=0, p95_latency_ms=210, p95_ttft_ms=80), "ttft_ratio", "2.00x"),
])
def test_breach_names_the_guard_and_figures(cand, guard, figure):
    v = evaluate(BASE, cand, G)
    assert v.status == "breach"
    assert [b.guard for b in v.breaches] == [guard]
    assert figure in v.breaches[0].detail and guard in v.summary


def test_fresh_eval_failure_is_a_breach():
    v = evaluate(BASE, ArmStats(requests=100, p95_latency_ms=200, p95_ttft_ms=40), G,
                 eval_failure="FAIL: math dropped 9 pts")
    assert v.status == "breach" and v.breaches[0].guard == "eval"


def test_too_few_candidate_requests_is_inconclusive_never_pass():
    v = evaluate(BASE, ArmStats(requests=49, errors=0, p95_latency_ms=100, p95_ttft_ms=20), G)
    assert v.status == "inconclusive" and "candidate 49/50" in v.summary


def test_too_few_baseline_requests_is_inconclusive():
    v = evaluate(ArmStats(requests=3, p95_latency_ms=100), ArmStats(requests=80, p95_latency_ms=900), G)
    assert v.status == "inconclusive" and "baseline 3/50" in v.summary


def test_error_rate_breach_needs_only_the_candidate_arm():
    v = evaluate(ArmStats(requests=0), ArmStats(requests=60, errors=30), G)
    assert v.status == "breach" and v.breaches[0].guard == "error_rate"


def test_arm_stats_counts_5xx_not_4xx_and_ignores_failed_latencies():
    rows = [(200, 100.0, 10.0)] * 18 + [(200, 300.0, 30.0), (200, 1000.0, 50.0)] + [(500, 1.0, None),
                                                                                     (400, 1.0, None)]
    s = arm_stats(rows)
    assert s.requests == 21 and s.errors == 1  # the 400 is left out of the count too
    assert s.p95_latency_ms == 300.0 and s.p95_ttft_ms == 30.0


def test_percentile_nearest_rank():
    assert percentile([], 95) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
