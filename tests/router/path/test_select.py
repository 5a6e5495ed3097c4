"""router.select: the least-loaded node by power of two choices, and the tiers an unpinned request may use
(pure, no server)."""

from __future__ import annotations

from quantroute.router.path.select import pick_node
from quantroute.tiers import Tier, tiers_at_or_above


class N:
    def __init__(self, key, inflight=0, waiting=0, kv=0.0, speed=1.0, healthy=True):
        self.key, self.inflight, self.waiting, self.kv_usage, self.speed = key, inflight, waiting, kv, speed
        self.max_inflight, self.max_waiting, self.available = 10, 10, healthy


def test_select_least_load_weighted_by_speed_and_never_lower_tier():
    a, b = N("a", inflight=4), N("b", inflight=4, speed=2.0)
    assert pick_node([a, b]) is b  # same queue, twice as fast
    assert pick_node([N("x", inflight=10), N("y", healthy=False)]) is None  # full / down
    assert pick_node([a, b], exclude={"b"}) is a
    assert tiers_at_or_above(Tier.int8) == [Tier.int8, Tier.fp8, Tier.fp16]
    assert tiers_at_or_above(Tier.int8, ceiling=Tier.fp8) == [Tier.int8, Tier.fp8]
