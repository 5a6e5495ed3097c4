"""router.canary: the salted hash that assigns a session to an arm (pure, no server)."""

from __future__ import annotations

from quantroute.router.path.canary import CANDIDATE, bucket, choose_arm


def test_canary_hash_is_stable_and_monotonic_in_percent():
    keys = [f"k{i}" for i in range(2000)]
    at10 = {k for k in keys if choose_arm(k, 10, "m") == CANDIDATE}
    at25 = {k for k in keys if choose_arm(k, 25, "m") == CANDIDATE}
    assert at10 <= at25  # raising the percent never moves a candidate session back
    assert 100 < len(at10) < 300 and bucket("k1", "m") == bucket("k1", "m")
