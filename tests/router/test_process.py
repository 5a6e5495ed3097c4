"""A router serving its own process (`quantroute router`) tunes that process; one embedded in tests does not."""

from __future__ import annotations

import gc

from tests.router.conftest import router_at


def test_a_router_owning_its_process_keeps_its_startup_heap_out_of_the_gc(make_settings):
    """A full collection walked every module, ORM registry and pool: ~70 ms with the event loop stopped, the
    p99 at concurrency 1. What is alive after startup is frozen out of the cyclic GC's sight."""
    gc.unfreeze()
    try:
        with router_at(make_settings()):
            assert gc.get_freeze_count() == 0  # embedded (tests, several apps in one process): left alone
        with router_at(make_settings(), own_process=True):
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
