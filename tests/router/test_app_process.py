"""A router serving its own process (`quantroute router`) tunes that process; one embedded in tests does not."""

from __future__ import annotations

import gc

from quantroute.router.heap import GC_YOUNG_THRESHOLD
from tests.router.conftest import router_at


def test_a_router_owning_its_process_keeps_its_startup_heap_out_of_the_gc(make_settings):
    """A full collection walked every module, ORM registry and pool: ~70 ms with the event loop stopped, the
    p99 at concurrency 1. What is alive after startup is frozen out of the cyclic GC's sight, and the young
    generation may hold what the requests in flight hold without being walked (GC_YOUNG_THRESHOLD)."""
    default = gc.get_threshold()
    gc.unfreeze()
    try:
        with router_at(make_settings()):
            # embedded (tests, several apps in one process): left alone
            assert gc.get_freeze_count() == 0 and gc.get_threshold() == default
        with router_at(make_settings(), own_process=True):
            assert gc.get_freeze_count() > 0
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, *default[1:]) and GC_YOUNG_THRESHOLD > default[0]
    finally:
        gc.set_threshold(*default)
        gc.unfreeze()
