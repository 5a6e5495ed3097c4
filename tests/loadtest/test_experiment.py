"""The fleet experiment's invariants on a short run: seed 000's fleet behind the real router (separate processes)."""

from pathlib import Path

from quantroute.fleet import load_fleet
from quantroute.loadtest import arms
from quantroute.loadtest.experiment import run_arms
from quantroute.loadtest.mix import tolerant_mix, tolerant_share
from quantroute.policy.loader import load_policy
from quantroute.traffic import load_traffic, with_model

REPO = Path(__file__).resolve().parents[2]
FLEET = load_fleet(REPO / "data/fleet-seed000.yaml")
BASE = load_policy(REPO / "policies/policy-0001.yaml")
MIXED = with_model(load_traffic(REPO / "data/traffic/mixed.jsonl"), "llama-13b")


def test_tiered_arm_keeps_sessions_on_one_tier_and_sensitive_requests_off_int4_unless_pinned():
    [b] = run_arms(FLEET, arms.adapt(BASE, FLEET), [("b", "tiered", MIXED)], concurrency=12, time_scale=0.5,
                   seconds=3.0, warmup_s=0.5)
    inv = b.invariants
    assert b.requests > 20 and b.errors == 0
    assert set(b.tier_share) == {"fp16", "int4"}
    assert inv.sessions > 0 and inv.mid_session_switches == 0
    assert inv.sensitive > 0 and inv.sensitive_on_int4_unpinned == 0
    assert inv.sensitive_on_int4 == inv.sensitive_on_int4_pinned
    assert b.output_tok_s > 0 and b.by_class["sensitive"]["tiers"]


def test_baseline_policy_sends_everything_to_fp16():
    [a] = run_arms(FLEET, arms.fp16_only(BASE, FLEET), [("a", "fp16 only", MIXED)], concurrency=8, time_scale=0.5,
                   seconds=2.0, warmup_s=0.5)
    assert a.tier_share == {"fp16": 1.0} and a.invariants.sensitive_on_int4 == 0
    assert a.needed_fp16_share == 1.0 and a.fleet_warning


def test_tolerant_mix_share_and_fleet_warning():
    pool = with_model([ln for f in ("mixed", "chat-only", "sensitive-heavy")
                       for ln in load_traffic(REPO / f"data/traffic/{f}.jsonl")], "llama-13b")
    tiered = arms.adapt(BASE, FLEET)
    low, high = tolerant_mix(pool, 0.0, requests=120), tolerant_mix(pool, 1.0, requests=120)
    assert tolerant_share(low) == 0.0 and tolerant_share(high) == 1.0
    assert 120 <= len(low) < 130
    assert arms.top_tier_share(tiered, low)[1] is True  # > 70 % need fp16: the warning fires
    share, fires = arms.top_tier_share(tiered, high)
    assert share < 0.7 and not fires
    tuned = arms.tuned(BASE, FLEET)
    assert arms.needed_tiers(tuned, MIXED)["int4"] > arms.needed_tiers(tiered, MIXED)["int4"]
