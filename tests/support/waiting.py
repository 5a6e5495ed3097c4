"""`wait_until`: the one poll-to-a-bound loop for tests that wait on another thread or process.

Things the tests start (routers, simulated nodes, controllers, writers that flush in batches) reach a state some
time later; a test polls for it with a bound, so a broken part fails the test with what it waited for instead of
hanging it. The bound is generous on purpose: it is never what a test asserts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, what: str | Callable[[], object], timeout: float = 10.0,
               interval: float = 0.05, ignore: tuple[type[Exception], ...] = ()) -> T:
    """Call `predicate` every `interval` seconds until it returns something truthy, and return that.

    Once `timeout` seconds have passed, fail with an AssertionError naming `what` was awaited and the last value
    seen (cut to 500 characters). `what` may be a callable, evaluated only on failure, for a message
    that shows state at that moment. Exceptions of the types in `ignore` (a server not listening yet) count as
    "not yet"; the last one is chained to the failure."""
    deadline = time.monotonic() + timeout
    while True:
        error: Exception | None = None
        try:
            got = predicate()
        except ignore as e:
            error, last = e, f"{type(e).__name__}: {e}"
        else:
            if got:
                return got
            last = repr(got)
        if time.monotonic() >= deadline:
            name = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {name} (last: {last[:500]})") from error
        time.sleep(interval)
