"""Agreement rates, CIs and suggestions from shadow pairs (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from quantroute.policy.loader import load_policy, policy_to_data, validate_data
from quantroute.shadow.analysis import analyse, apply_suggestion, wilson

REPO_POLICY = "policies/policy-0001.yaml"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def pair(i: int, *, rule: str | None, served: str, shadow: str, agree: bool, compared: bool = True) -> dict:
    return {"id": i, "ts": T0 + timedelta(minutes=2 * i), "rules": [rule] if rule else [], "served_tier": served,
            "served_deployment": f"dep-{served}", "shadow_tier": shadow, "shadow_deployment": f"dep-{shadow}",
            "compared": compared, "agree": agree if compared else None, "exact": agree if compared else None}


def pairs(n: int, agree: int, **kw) -> list[dict]:
    return [pair(i, agree=i < agree, **kw) for i in range(n)]


@pytest.fixture
def policy():
    return load_policy(REPO_POLICY)


def test_wilson_matches_the_textbook_interval():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)


def test_rates_per_pair_and_rule_count_only_compared_pairs(policy):
    data = (pairs(40, 30, rule="greedy-structured", served="fp16", shadow="int4")
            + pairs(5, 0, rule="greedy-structured", served="fp16", shadow="int4", compared=False))
    rep = analyse(data, policy)
    assert rep.pairs == 40 and rep.failed == 5
    [r] = rep.by_pair
    assert (r.pairs, r.agree, r.rate) == (40, 30, 0.75) and r.ci_low < 0.75 < r.ci_high
    assert [x.key["rule"] for x in rep.by_rule] == ["greedy-structured"]
    assert sum(t.pairs for t in rep.trend) == 40 and len(rep.trend) == 2  # two hourly buckets


def test_a_cheap_tier_rule_that_disagrees_is_a_raise_candidate_with_its_weight(policy):
    data = pairs(40, 20, rule="casual-chat", served="int4", shadow="fp16")
    rep = analyse(data, policy)
    [s] = rep.raise_
    assert (s.rule, s.current_weight, s.proposed_weight, s.target_tier) == ("casual-chat", -2, 6, "fp16")
    assert "20/40 shadow pairs agree" in s.evidence and rep.lower == []


def test_too_few_pairs_or_an_uncertain_rate_suggests_nothing(policy):
    assert analyse(pairs(10, 2, rule="casual-chat", served="int4", shadow="fp16"), policy).raise_ == []
    # 88 % of 40: its CI reaches above 90 %, so it is not surely below
    assert analyse(pairs(40, 35, rule="casual-chat", served="int4", shadow="fp16"), policy).raise_ == []


def test_a_rule_already_requiring_the_top_tier_gets_a_note_not_a_weight(policy):
    [s] = analyse(pairs(40, 10, rule="greedy-structured", served="int4", shadow="fp16"), policy).raise_
    assert s.proposed_weight is None and "session pins" in s.note


def test_a_top_tier_rule_whose_lower_shadow_agrees_is_a_lower_candidate(policy):
    data = pairs(200, 200, rule="greedy-structured", served="fp16", shadow="fp8")
    [s] = analyse(data, policy).lower
    assert (s.rule, s.current_weight, s.proposed_weight, s.target_tier) == ("greedy-structured", 6, 3, "fp8")
    assert policy.minimum_tier(s.proposed_weight).value == "fp8"
    draft = apply_suggestion(policy_to_data(policy), s)
    changed = validate_data(draft, "draft")
    assert next(r.weight for r in changed.rules if r.name == "greedy-structured") == 3
    assert "greedy-structured" in changed.message and "200/200" in changed.message
    assert next(r.weight for r in policy.rules if r.name == "greedy-structured") == 6  # the original is untouched
