"""Supervised background tasks: a loop that crashes is logged, counted and restarted after a backoff.

The router's background loops (policy watch and poll, probes, node refresh, pin purge, log writer) are meant
to run forever, and an exception nobody awaits would end one silently (a policy watcher would never reload
again). Cancellation still stops them: that is how shutdown ends them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


async def supervise(name: str, make: Callable[[], Awaitable[None]], *, on_crash: Callable[[str], None] | None = None,
                    backoff_s: float = 0.5, max_backoff_s: float = 30.0) -> None:
    """Run `make()` again whenever it raises (or returns); doubling backoff, reset after a minute of running."""
    loop = asyncio.get_running_loop()
    delay = backoff_s
    while True:
        started = loop.time()
        try:
            await make()
            log.error("background task %s returned; restarting it", name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background task %s crashed; restarting it in %.1fs", name, delay)
        if on_crash:
            on_crash(name)
        if loop.time() - started > 60:
            delay = backoff_s
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_backoff_s)
