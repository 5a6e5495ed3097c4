"""quantroute.tune on small synthetic cases whose optimum is known by hand: the fleet capacity under a demand split,
the search within a quality budget and a guard, and the errors for missing evals and unmeetable or unknown SLOs."""

from __future__ import annotations

import pytest

from quantroute.capacity import FORMATS
from quantroute.catalog import load_hardware, load_models
from quantroute.policy.loader import validate_data
from quantroute.quality_cost import TierDeltas
from quantroute.slo import NamedSlo, slo_named
from quantroute.tiers import Tier
from quantroute.tune import (
    MissingEvals,
    NodeModel,
    SloUnmeetable,
    Tuner,
    TuneRequest,
    fleet_capacity,
    node_capacity,
    tuned_policy,
)

MODEL = "llama3-8b"
MATH = TuneRequest({"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "solve x + 2 = 5"}]},
                   {})
CHAT = TuneRequest({"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "tell me a joke"}]},
                   {})
SHAPE = load_models()[MODEL]
A100 = load_hardware()["a100-80g"]
NODES = [NodeModel(Tier.fp16, A100, FORMATS["fp16"], 64), NodeModel(Tier.int4, A100, FORMATS["int4"], 64)]
THROUGHPUT = slo_named("throughput")


def policy(min_score: float = 5, *, spill: bool = True):
    return validate_data({
        "version": 3, "author": "t", "created_at": "2026-01-01T00:00:00Z",
        "tiers": [{"name": "fp16", "deployments": {MODEL: ["f"]}}, {"name": "int4", "deployments": {MODEL: ["q"]}}],
        "rules": [{"name": "math", "weight": 2, "when": {"keywords": {"any": ["solve"]}}}],
        "thresholds": [{"min_score": min_score, "tier": "fp16"}], "spill": {"enabled": spill}})


def deltas(math: float = -0.20) -> dict[str, TierDeltas]:
    return {"int4": TierDeltas(tier=Tier.int4, deployment="q", overall=math / 2,
                               categories={"math": math, "chat": 0.0})}


def caps(slo: NamedSlo = THROUGHPUT, context: int = 55) -> tuple[float, float]:
    return tuple(node_capacity(n, SHAPE, slo, context=context, prompt=10) for n in NODES)  # type: ignore[return-value]  # one per node of NODES


def test_fleet_capacity_with_spill_lets_cheap_demand_use_the_tiers_above():
    # ranks: fp16, fp8, int8, int4; 40 % of the tokens need fp16, 60 % may run on int4
    demand, capacity = [0.4, 0, 0, 0.6], [100.0, 0, 0, 150.0]
    assert fleet_capacity(demand, capacity, spill=True) == 250.0  # fp16 needs 0.4 x 250 = 100: exactly full
    assert fleet_capacity(demand, capacity, spill=False) == 250.0
    demand = [0.2, 0, 0, 0.8]
    assert fleet_capacity(demand, capacity, spill=True) == 250.0
    assert fleet_capacity(demand, capacity, spill=False) == 150.0 / 0.8  # int4 alone for its 80 %
    assert fleet_capacity([0.8, 0, 0, 0.2], capacity, spill=True) == 100.0 / 0.8  # fp16 is the bottleneck


def test_the_optimum_sends_math_up_exactly_while_the_fleet_stays_full():
    """3 math requests in 10 and FP16 holding 39 % of the fleet's capacity: routing all math to FP16 keeps every
    node busy (spill fills the rest) at zero loss, so that is the known optimum, from a policy that sent math to
    INT4 (threshold 5 above the rule's weight 2)."""
    requests = [MATH] * 3 + [CHAT] * 7
    result = Tuner(policy(5), requests, deltas(), NODES, SHAPE, THROUGHPUT, budget_pts=10,
                   category_budget_pts=25).run()
    c16, c4 = result.tier_capacity["fp16"], result.tier_capacity["int4"]
    assert 0.3 <= c16 / (c16 + c4) < 0.45
    assert result.active.quality.loss_pts["math"] == pytest.approx(20.0)
    best = result.best
    assert best is not None and best.within
    assert best.quality.overall_pts == 0 and best.tier_share == {"fp16": 0.3, "int4": 0.7}
    assert best.capacity_tok_s == pytest.approx(c16 + c4)
    assert best.thresholds[0].min_score <= 2  # the rule's weight now reaches FP16
    assert result.candidates[0].capacity_tok_s == pytest.approx(best.capacity_tok_s)


def test_a_tight_category_budget_costs_capacity_and_the_tuner_pays_it():
    """6 math requests in 10 and INT4 math 20 points worse, at most 5 in any category: every math request must
    run on FP16, which then limits the fleet to C16 / 0.6."""
    requests = [MATH] * 6 + [CHAT] * 4
    result = Tuner(policy(5), requests, deltas(), NODES, SHAPE, THROUGHPUT, budget_pts=50,
                   category_budget_pts=5).run()
    c16 = result.tier_capacity["fp16"]
    assert not result.active.within  # the active policy breaks the budget (math 20 points)
    assert result.best is not None and result.best.quality.worst_pts == 0
    assert result.best.capacity_tok_s == pytest.approx(c16 / 0.6)
    # with a loose budget all of it may go to INT4 and the fleet is full again
    loose = Tuner(policy(5), requests, deltas(), NODES, SHAPE, THROUGHPUT, budget_pts=50,
                  category_budget_pts=25).run()
    assert loose.best is not None and loose.best.capacity_tok_s > result.best.capacity_tok_s


def test_the_guard_keeps_labelled_sensitive_requests_up_whatever_the_budget():
    requests = [MATH] * 6 + [CHAT] * 4
    free = deltas(math=0.0)  # evals see no loss on math: only the guard keeps it on FP16
    unguarded = Tuner(policy(5), requests, free, NODES, SHAPE, THROUGHPUT, budget_pts=1, category_budget_pts=1).run()
    assert unguarded.best is not None and unguarded.best.tier_share.get("int4") == 1.0
    guarded = Tuner(policy(5), requests, free, NODES, SHAPE, THROUGHPUT, budget_pts=1, category_budget_pts=1,
                    guard=[MATH]).run()
    assert guarded.best is not None and guarded.best.tier_share == {"fp16": 0.6, "int4": 0.4}
    assert not guarded.active.within  # the active policy serves the guarded request on INT4


def test_the_draft_carries_the_weights_thresholds_and_the_slo_and_validates():
    result = Tuner(policy(5), [MATH] * 3 + [CHAT] * 7, deltas(), NODES, SHAPE, slo_named("tpot50"), budget_pts=10,
                   category_budget_pts=25).run()
    assert result.best is not None
    draft = tuned_policy(policy(5), result.best, slo_named("tpot50"), version=4, author="tuner",
                         created_at="2026-01-02T00:00:00Z", budget="10 / 25 pts")
    assert (draft.version, draft.parent, draft.spill.tpot_p95_ms) == (4, 3, 50)
    assert draft.thresholds == result.best.thresholds and "TPOT p95 <= 50 ms" in draft.message
    from quantroute.policy.loader import policy_to_data
    validate_data(policy_to_data(draft))


def test_missing_eval_data_names_the_tier_and_categories():
    partial = {"int4": TierDeltas(tier=Tier.int4, deployment="q", overall=-0.1, categories={"chat": 0.0})}
    with pytest.raises(MissingEvals, match=r"int4 \(categories math\)"):
        Tuner(policy(), [MATH, CHAT], partial, NODES, SHAPE, THROUGHPUT, budget_pts=1, category_budget_pts=1)
    with pytest.raises(MissingEvals, match=r"int4 \(no eval run at all\).*run quantroute eval"):
        Tuner(policy(), [MATH, CHAT], {}, NODES, SHAPE, THROUGHPUT, budget_pts=1, category_budget_pts=1,
              eval_hint="run quantroute eval")


def test_an_slo_no_policy_meets_says_what_the_fleet_can_do_and_unknown_names_list_the_valid_ones():
    with pytest.raises(SloUnmeetable, match=r"TPOT p95 <= 2 ms.*best achievable TPOT is 4\.\d ms"):
        Tuner(policy(), [MATH, CHAT], deltas(), NODES, SHAPE, NamedSlo(name="x", label="TPOT p95 <= 2 ms",
                                                                       tpot_p95_ms=2), budget_pts=1,
              category_budget_pts=1)
    with pytest.raises(ValueError, match=r"unknown SLO 'tpot5'; valid: tpot30 \(TPOT p95 <= 30 ms\), tpot50"):
        slo_named("tpot5")


def test_a_tpot_slo_caps_the_batch_and_so_the_capacity():
    tight = caps(NamedSlo(name="t", label="TPOT p95 <= 12 ms", tpot_p95_ms=12), context=4000)
    loose = caps(THROUGHPUT, context=4000)
    assert 0 < tight[0] < loose[0]
