"""The optional live agreement guard: the candidate's agreement with the reference tier on shadow pairs
may fall below the baseline's by at most a margin; too few pairs holds the step (inconclusive), never passes."""

from __future__ import annotations

from quantroute.policy.model import Guards, LiveAgreementGuard
from quantroute.rollout.guards import AgreementStats, ArmStats, evaluate

G = Guards(min_requests=50, min_live_agreement=LiveAgreementGuard(max_drop=0.05, min_pairs=40))
BASE = ArmStats(requests=400, errors=0, p95_latency_ms=200, p95_ttft_ms=40)
CAND = ArmStats(requests=100, errors=0, p95_latency_ms=200, p95_ttft_ms=40)


def test_agreement_within_the_margin_passes_and_is_reported():
    v = evaluate(BASE, CAND, G, agreement=(AgreementStats(pairs=100, agree=90), AgreementStats(pairs=50, agree=43)))
    assert v.status == "pass" and "live agreement 86.0% vs 90.0%" in v.summary
    assert v.agreement is not None and v.agreement["candidate"].pairs == 50


def test_a_drop_beyond_the_margin_is_a_breach_with_its_figures():
    v = evaluate(BASE, CAND, G, agreement=(AgreementStats(pairs=100, agree=90), AgreementStats(pairs=50, agree=40)))
    assert v.status == "breach" and [b.guard for b in v.breaches] == ["live_agreement"]
    b = v.breaches[0]
    assert b.value == 0.9 - 0.8 and b.limit == 0.05
    assert "80.0% of 50" in b.detail and "90.0% of 100" in b.detail and "10.0 points lower > 5" in b.detail


def test_too_few_pairs_in_either_arm_is_inconclusive_even_when_the_rate_is_bad():
    for base, cand in ((AgreementStats(pairs=100, agree=90), AgreementStats(pairs=39, agree=0)),
                       (AgreementStats(pairs=10, agree=10), AgreementStats(pairs=100, agree=50))):
        v = evaluate(BASE, CAND, G, agreement=(base, cand))
        assert v.status == "inconclusive" and "shadow pairs" in v.summary and not v.breaches


def test_a_better_candidate_passes():
    v = evaluate(BASE, CAND, G, agreement=(AgreementStats(pairs=50, agree=30), AgreementStats(pairs=50, agree=45)))
    assert v.status == "pass"


def test_unconfigured_the_guard_ignores_agreement_figures():
    plain = Guards(min_requests=50)
    v = evaluate(BASE, CAND, plain, agreement=(AgreementStats(pairs=100, agree=100), AgreementStats(pairs=100)))
    assert v.status == "pass" and "live agreement" not in v.summary


def test_other_breaches_still_breach_while_pairs_are_few():
    bad = ArmStats(requests=100, errors=10, p95_latency_ms=200, p95_ttft_ms=40)
    v = evaluate(BASE, bad, G, agreement=(AgreementStats(pairs=1), AgreementStats(pairs=1)))
    assert v.status == "breach" and [b.guard for b in v.breaches] == ["error_rate"]
