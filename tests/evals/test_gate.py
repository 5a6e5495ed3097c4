import pytest

from quantroute.evals.gate import GateConfig, evaluate, next_higher_tier, parse_category_thresholds
from quantroute.evals.stats import Pair, build_report
from quantroute.tiers import Tier


def pairs(category: str, n: int, only_cand_fail: int, only_base_fail: int = 0, **kw) -> list[Pair]:
    out = []
    for i in range(n):
        base, cand = True, True
        if i < only_cand_fail:
            cand = False
        elif i < only_cand_fail + only_base_fail:
            base = False
        out.append(Pair(item_id=f"{category}-{i}", category=category, base_pass=base, cand_pass=cand, **kw))
    return out


def test_passes_when_nothing_drops():
    v = evaluate(build_report(pairs("math", 50, 1, 1) + pairs("chat", 50, 0)), GateConfig(), candidate_tier=Tier.fp8)
    assert v.passed and v.reasons == [] and v.next_tier is None and v.summary() == "PASS"


def test_overall_and_category_reasons_are_named():
    report = build_report(pairs("math", 40, 6) + pairs("chat", 60, 0))
    v = evaluate(report, GateConfig(), candidate_tier=Tier.int4, passing_runs={Tier.int8: 17})
    assert not v.passed
    assert [(r.check, r.scope) for r in v.reasons] == [("overall", "overall"), ("category", "math")]
    assert v.reasons[1].drop == pytest.approx(0.15) and v.reasons[1].net_items == 6
    assert v.next_tier == Tier.int8 and v.next_tier_passing_run == 17
    assert "math pass rate dropped 15.0 pts" in v.summary() and "run 17 already passed at int8" in v.summary()


def test_category_threshold_overrides_default():
    report = build_report(pairs("math", 100, 3) + pairs("chat", 900, 0))  # math -3 pts, overall -0.3
    assert not evaluate(report, GateConfig()).passed
    assert evaluate(report, GateConfig(category_thresholds={"math": 0.03})).passed
    v = evaluate(report, GateConfig(category_thresholds={"math": 0.03, "poetry": 0.1}))
    assert any("poetry" in n for n in v.notes)


def test_a_single_item_never_fails_a_check_but_is_reported():
    v = evaluate(build_report(pairs("safety", 16, 1) + pairs("chat", 200, 0)), GateConfig())
    assert v.passed and any("safety" in n and "1 item(s) net" in n for n in v.notes)
    assert not evaluate(build_report(pairs("safety", 16, 1) + pairs("chat", 200, 0)), GateConfig(min_items=1)).passed


def test_validity_drop_fails_even_when_pass_rates_hold():
    base_broken = pairs("json", 30, 0, checks_validity=True)
    cand_invalid = [p.model_copy(update={"cand_valid": False}) if i < 3 else p for i, p in enumerate(base_broken)]
    v = evaluate(build_report(cand_invalid), GateConfig())
    assert not v.passed and [r.check for r in v.reasons] == ["validity"]
    assert "JSON/tool validity dropped 10.0 pts" in v.reasons[0].message


def test_next_higher_tier_follows_the_ladder():
    assert [next_higher_tier(t) for t in (Tier.int4, Tier.int8, Tier.fp8, Tier.fp16, None)] == \
        [Tier.int8, Tier.fp8, Tier.fp16, None, None]
    v = evaluate(build_report(pairs("math", 40, 6)), GateConfig(), candidate_tier=Tier.fp16)
    assert v.next_tier is None and "nothing higher" in v.summary()


def test_parse_category_thresholds():
    assert parse_category_thresholds(["math=0.03", "code = 5%"]) == {"math": 0.03, "code": 0.05}
    for bad in ("math", "math=lots", "=0.1", "math=2"):
        with pytest.raises(ValueError, match="category threshold"):
            parse_category_thresholds([bad])
