"""The router process's heap and the cyclic garbage collector: what startup leaves alive is frozen out of the
collector's sight, and the young generation may hold what requests in flight hold."""

from __future__ import annotations

import gc

# Young objects the cyclic GC lets accumulate before it collects (CPython's default is 700). Requests in flight
# hold a few thousand objects at any moment, freed by reference counting; at the default the GC keeps walking them
# with the event loop stopped. Above what requests in flight hold, it collects only what outlives requests.
GC_YOUNG_THRESHOLD = 10_000


def freeze_startup_heap() -> None:
    """Everything alive after startup (modules, the ORM's registries, the policy, pools) stays alive: move it out
    of the cyclic GC's sight, so a full collection does not walk it with the event loop stopped. Per-request
    objects are freed by reference counting, so the young generation may grow to GC_YOUNG_THRESHOLD."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
