"""router.path.spill: SLO-aware choice across the tiers a request may use (pure, no server): cheapest tier below
its knee, up to a higher tier with headroom at the knee, never down, and the reason for every move."""

from __future__ import annotations

from quantroute.policy.model import Spill
from quantroute.router.nodes.pool import Node
from quantroute.router.path.spill import KNEE, Target, choose, modelled_step, pressure
from quantroute.tiers import Tier

# A node's modelled decode step (seconds) at batch 0..8: 10 ms + 2 ms per sequence
STEPS = tuple(0.010 + 0.002 * max(b, 1) for b in range(9))
TPOT_20MS = Target(tpot_s=0.020, ttft_s=None, max_kv_usage=0.95)


def node(key: str, tier: Tier, *, inflight=0, waiting=0, kv=0.0, steps=STEPS, max_inflight=8, **kw) -> Node:
    n = Node(key=key, url=f"http://{key}", model="m", deployment=f"m-{tier.value}", tier=tier, format=tier.value,
             max_inflight=max_inflight, max_waiting=4, **kw)
    n.inflight, n.waiting, n.kv_usage, n.decode_steps = inflight, waiting, kv, steps
    return n


def pick(tiers, target=TPOT_20MS, **kw):
    names = [t[0].tier for t in tiers]
    return choose(names, tiers, target, **kw)


def test_pressure_is_the_modelled_step_at_the_next_batch_over_the_slo_scaled_by_what_was_observed():
    n = node("a", Tier.int4, inflight=4)
    assert pressure(n, TPOT_20MS) == (0.010 + 0.002 * 5) / 0.020 == KNEE  # its fifth sequence meets the SLO exactly
    n.tpot_scale = 1.5  # answers ran 1.5x slower than modelled (prefill stalls, longer contexts)
    assert pressure(n, TPOT_20MS) == 1.5
    assert abs(modelled_step(STEPS, 12) - (STEPS[8] + 4 * 0.002)) < 1e-12  # past the table: linear
    assert pressure(node("q", Tier.int4, waiting=1), TPOT_20MS) >= KNEE  # a queue inside the node: past the knee
    assert pressure(node("k", Tier.int4, kv=0.96), TPOT_20MS) >= KNEE  # KV cache full
    unknown = node("u", Tier.int4, steps=None)
    assert pressure(unknown, TPOT_20MS) == 0.0  # nothing known yet
    unknown.observe(ttft_s=0.1, tpot_s=0.030)
    assert pressure(unknown, TPOT_20MS) == 1.5  # hardware not in the tables: the TPOT it showed
    ttft = Target(tpot_s=None, ttft_s=0.050, max_kv_usage=0.95)
    assert pressure(unknown, ttft) == 2.0


def test_below_its_knee_the_cheapest_tier_serves():
    c = pick([[node("i4", Tier.int4, inflight=2)], [node("f16", Tier.fp16)]])
    assert (c.node.key, c.at, c.reason) == ("i4", 0, None)


def test_at_its_knee_a_request_spills_up_to_a_tier_with_headroom_and_says_why():
    c = pick([[node("i4", Tier.int4, inflight=5)], [node("i8", Tier.int8, inflight=6)],
              [node("f16", Tier.fp16, inflight=1)]])
    assert (c.node.key, c.at, c.reason) == ("f16", 2, "spilled up: int4 at its knee")


def test_spill_takes_the_cheapest_tier_above_with_headroom():
    c = pick([[node("i4", Tier.int4, inflight=5)], [node("i8", Tier.int8, inflight=1)],
              [node("f16", Tier.fp16)]])
    assert (c.node.key, c.reason) == ("i8", "spilled up: int4 at its knee")


def test_every_tier_at_its_knee_the_cheapest_keeps_it():
    """A higher tier past its knee has no headroom to lend: its room is what its floor-bound traffic waits for,
    so a tolerant request stays on its cheapest tier even when that one is the more pressed."""
    for inflight in (5, 7):
        tiers = [[node("i4", Tier.int4, inflight=7)], [node("f16", Tier.fp16, inflight=inflight)]]
        c = pick(tiers)
        assert (c.node.key, c.at, c.reason) == ("i4", 0, None)


def test_never_down_a_request_allowed_only_high_tiers_never_sees_a_lower_one():
    """The caller passes the request's ladder (its minimum tier and above): a sensitive request's ladder is fp16
    alone, so however pressed fp16 is and however idle int4, it stays on fp16."""
    idle_int4 = node("i4", Tier.int4)
    c = pick([[node("f16", Tier.fp16, inflight=7)]])
    assert c.node.key == "f16" and c.reason is None
    assert idle_int4.key not in {c.node.key}


def test_no_room_on_the_cheapest_tier_escalates_and_no_room_anywhere_is_no_node():
    full = node("i4", Tier.int4, inflight=8)  # max_inflight 8: no room
    c = pick([[full], [node("f16", Tier.fp16)]])
    assert (c.node.key, c.at, c.reason, c.cheapest_full) == ("f16", 1, "escalated: int4 full", True)
    c = pick([[full], [node("f16", Tier.fp16, inflight=8)]])
    assert c.node is None and c.cheapest_full


def test_spill_off_keeps_the_cheapest_tier_with_room():
    tiers = [[node("i4", Tier.int4, inflight=7)], [node("f16", Tier.fp16)]]
    c = pick(tiers, target=None)
    assert (c.node.key, c.reason) == ("i4", None)
    assert Target.of(Spill(enabled=False)) is None
    assert Target.of(Spill(tpot_p95_ms=30, ttft_p95_ms=800)) == Target(0.030, 0.8, 0.95)


def test_a_failed_node_is_excluded_from_spill_too():
    tiers = [[node("i4", Tier.int4, inflight=5)], [node("f16", Tier.fp16), node("f16b", Tier.fp16, inflight=1)]]
    c = pick(tiers, exclude={"f16"})
    assert c.node.key == "f16b"


def test_observed_latency_moves_the_scale_towards_what_the_node_shows():
    n = node("a", Tier.int4, inflight=0)
    for _ in range(200):
        n.observe(ttft_s=0.05, tpot_s=2 * STEPS[1])
    assert 1.9 < n.tpot_scale <= 2.0 and abs(n.tpot_s - 2 * STEPS[1]) < 1e-9 and abs(n.ttft_s - 0.05) < 1e-9
    n.observe(ttft_s=None, tpot_s=None)  # an answer without the figures changes nothing
    assert 1.9 < n.tpot_scale <= 2.0
