"""The min_live_agreement guard in the rollout service: it reads the shadow pairs of each arm against the top tier
(never the request log) and rolls back a candidate that agrees less than the baseline by more than the margin."""

from __future__ import annotations

import pytest

from tests.rollout.conftest import BASE, CAND, LATENCY_OFF, N, approved, send, sessions, wait_logged
from tests.shadow.seed import seed_pairs

LIVE = {"guards": {"max_error_rate": 0.05, "max_p95_latency_ratio": LATENCY_OFF, "max_ttft_ratio": LATENCY_OFF,
                   "window_s": 120, "min_requests": 10, "require_eval_pass": True,
                   "min_live_agreement": {"max_drop": 0.05, "min_pairs": 20}}}


@pytest.mark.parametrize("policies", [LIVE], indirect=True)
def test_a_candidate_that_agrees_less_is_held_then_rolled_back(live, db_engine):
    url, svc = live
    approved(url, svc, db_engine)
    send(url, sessions())
    wait_logged(db_engine, N)
    v = svc.guard_verdict("llama3-8b")
    assert v.status == "inconclusive" and "shadow pairs" in v.summary  # no pairs yet: holds, never passes
    seed_pairs(db_engine, rule="casual", served="int4", shadow="fp16", n=30, agree=29, arm="baseline",
               served_deployment=BASE, spread_s=0)
    seed_pairs(db_engine, rule="casual", served="int4", shadow="fp16", n=30, agree=30, arm="candidate",
               served_deployment=CAND, spread_s=0)
    assert svc.guard_verdict("llama3-8b").status == "pass"
    seed_pairs(db_engine, rule="casual", served="int4", shadow="fp16", n=30, agree=10, arm="candidate",
               served_deployment=CAND, spread_s=0)
    v = svc.evaluate_guards("llama3-8b")
    assert v.status == "breach" and [b.guard for b in v.breaches] == ["live_agreement"], v.summary
    assert v.agreement["candidate"].pairs == 60 and v.agreement["baseline"].agree == 29
    assert svc.status("llama3-8b").phase == "rolled-back"
