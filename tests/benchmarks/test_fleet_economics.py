"""The equal-hardware experiment's parts, without a fleet: arm construction, the quality-cost arithmetic, the
threshold grid and the capacity read under each SLO from one staircase."""

from __future__ import annotations

from pathlib import Path

import pytest

from quantroute.fleet import load_fleet
from quantroute.loadtest.stats import Slo
from quantroute.loadtest.traffic import load_traffic, with_model
from quantroute.policy.loader import dump_policy, parse_policy
from quantroute.quality_cost import TierDeltas, deltas_from_report, quality_cost, request_category
from quantroute.tiers import Tier
from support import fleet_arms as arms
from support.fleet_capacity import CapacityResult, Invariants, StepResult
from support.fleet_mixes import multi_turn
from support.fleet_slo import SLOS, THROUGHPUT, LatencySlo, capacities, capacity_under

REPO = Path(__file__).resolve().parents[2]
FLEET = load_fleet(REPO / "data/fleet-seed000.yaml")
BASE = parse_policy((REPO / "policies/policy-0001.yaml").read_text(), "policy-0001.yaml")
MIXED = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), "llama-13b")
INT4 = TierDeltas(tier=Tier.int4, deployment="d-int4", overall=-0.04, categories={"math": -0.07, "chat": 0.0})


def test_all_fp16_puts_the_fp16_deployment_on_every_node_of_the_same_hardware():
    eight = arms.all_fp16(FLEET)
    assert [n.id for n in eight.nodes] == [n.id for n in FLEET.nodes]
    assert {n.deployment.tier for n in eight.nodes} == {Tier.fp16}
    assert [(n.hardware, n.vram_gb, n.max_num_seqs) for n in eight.nodes] == \
        [(n.hardware, n.vram_gb, n.max_num_seqs) for n in FLEET.nodes]
    policy = arms.adapt(BASE, eight)
    assert policy.deployments_for("llama-13b", Tier.fp16) == ["llama-13b-fp16"]
    assert policy.deployments_for("llama-13b", Tier.int4) == []


def test_blind_arm_is_one_tier_of_every_node_for_the_router_and_loads_as_a_policy():
    view = arms.blind_view(FLEET)
    assert {n.deployment.tier for n in view.nodes} == {Tier.fp16}
    assert {n.deployment.id for n in view.nodes} == {n.deployment.id for n in FLEET.nodes}  # the nodes' own ids
    assert {n.deployment.tier for n in FLEET.nodes} == {Tier.fp16, Tier.int4}  # the real fleet is untouched
    policy = arms.blind(BASE, FLEET)
    assert policy.rules == [] and sorted(policy.deployments_for("llama-13b", Tier.fp16)) == \
        ["llama-13b-fp16", "llama-13b-gptq-w4a16"]
    again = parse_policy(dump_policy(policy), "blind")  # what the router reads validates
    assert again.thresholds == policy.thresholds


def test_grid_spans_all_fp16_to_all_int4_most_int4_first_and_keeps_sessions_on_their_first_tier():
    grid = arms.threshold_grid(arms.adapt(BASE, FLEET), MIXED)
    shares = [p.int4_share for p in grid]
    assert shares == sorted(shares, reverse=True) and shares[0] == 1.0  # above every score: all on int4
    assert min(shares) < 0.5
    for p in grid:
        assert len(p.pairs) == len(MIXED)
        tiers = {}
        for ln, (_, tier) in zip(MIXED, p.pairs):
            if ln.session is not None:
                tiers.setdefault(ln.session, set()).add(tier)
        assert all(len(t) == 1 for t in tiers.values())  # the pin: one tier per session


def test_quality_cost_is_share_on_int4_times_its_drop_per_category():
    counts = {"math": {"fp16": 30, "int4": 10}, "chat": {"int4": 50}, "code": {"fp16": 5, "int4": 5}}
    q = quality_cost(counts, {"int4": INT4})
    assert q.loss_pts["math"] == pytest.approx(10 / 40 * 7.0)  # a quarter of math at -7 points
    assert q.loss_pts["chat"] == 0.0  # no drop measured on chat
    assert q.loss_pts["code"] == pytest.approx(0.5 * 4.0)  # no code items in the eval: the overall drop
    assert q.share_below_fp16 == {"math": 0.25, "chat": 1.0, "code": 0.5}
    assert q.overall_pts == pytest.approx((1.75 * 40 + 0 + 2.0 * 10) / 100)
    assert (q.worst_category, q.worst_pts) == ("code", pytest.approx(2.0))
    assert quality_cost({"math": {"fp16": 9}}, {}).overall_pts == 0.0  # all on FP16 costs nothing
    with pytest.raises(ValueError, match="no eval deltas for tier 'int8'"):
        quality_cost({"math": {"int8": 1}}, {"int4": INT4})


def test_deltas_come_from_a_stored_eval_report():
    report = {"overall": {"delta": -0.045}, "categories": [
        {"name": "math", "n": 28, "delta": -0.071}, {"name": "safety", "n": 0, "delta": 0.0}]}
    d = deltas_from_report(report, tier=Tier.int4, deployment="x", run_id=7)
    assert (d.run_id, d.delta("math"), d.delta("safety"), d.delta("chat")) == (7, -0.071, -0.045, -0.045)


@pytest.mark.parametrize(("body", "category"), [
    ({"messages": [{"role": "system", "content": "You write PostgreSQL."}, {"role": "user", "content": "Top users"}]},
     "code"),
    ({"messages": [{"role": "user", "content": "Extract the name"}], "response_format": {"type": "json_object"}},
     "json"),
    ({"messages": [{"role": "user", "content": "Book it"}], "tools": [{"type": "function"}]}, "structured"),
    ({"messages": [{"role": "user", "content": "Translate to Spanish: hello"}]}, "multilingual"),
    ({"messages": [{"role": "user", "content": "Solve: 2^(x+1) = 48"}]}, "math"),
    ({"messages": [{"role": "user", "content": "Summarise: " + "words " * 400}]}, "long_context"),
    ({"messages": [{"role": "user", "content": "tell me a joke"}]}, "chat"),
    ({"prompt": "Classify the sentiment: great"}, "structured"),
])
def test_request_category(body, category):
    assert request_category(body) == category


def step(conc: int, tok_s: float, *, ttft: float, tpot: float, errors: int = 0) -> StepResult:
    return StepResult(concurrency=conc, windows=[], output_tok_s=tok_s, tok_s_by_tier={}, ttft_p95_ms=ttft,
                      e2e_p95_ms=None, by_class={}, requests=100, errors=errors, errors_by_status={}, tier_share={},
                      tpot_p95_ms=tpot)


def test_capacity_under_each_slo_is_the_best_step_before_the_first_breach():
    steps = [step(8, 100, ttft=100, tpot=20), step(16, 180, ttft=300, tpot=40), step(32, 170, ttft=600, tpot=45),
             step(64, 260, ttft=1500, tpot=90), step(128, 300, ttft=4000, tpot=120, errors=5)]
    r = CapacityResult(name="x", label="x", time_scale=1, slo=Slo(max_error_rate=0.01), steps=steps,
                       capacity_index=None, stop_reason=None, needed_fp16_share=0, fleet_warning=False, pinned_waits=0,
                       pinned_503=0, cut_requests=0,
                       invariants=Invariants(sessions=0, mid_session_switches=0, sensitive=0, sensitive_on_int4=0,
                                             sensitive_on_int4_pinned=0, sensitive_on_int4_unpinned=0))
    caps = capacities(r)
    assert list(caps) == [s.name for s in SLOS]
    assert caps == {
        "TPOT p95 <= 30 ms": 140,  # 20 ms at 100 tok/s, 40 at 180: 30 ms half-way
        "TPOT p95 <= 50 ms": 180,  # crossing at 170 + 5/45 x 90 = 180, the best held step
        "TPOT p95 <= 100 ms": 260,  # the step after breaks the error limit: no crossing to take
        "TTFT p95 <= 0.5 s": 180,  # the breaking step served less: the best held step
        "TTFT p95 <= 1 s": pytest.approx(170 + 400 / 900 * 90),
        "throughput-bound": 260}  # 5 % errors at 128
    assert capacity_under(r, LatencySlo(name="none met", tpot_p95_ms=10)) is None
    assert capacity_under(r, THROUGHPUT).concurrency == 64


def test_multi_turn_mix_is_every_turn_of_every_session():
    turns = multi_turn(MIXED)
    assert turns and all(ln.session is not None for ln in turns)
    assert len(turns) == sum(1 for ln in MIXED if ln.session is not None)
