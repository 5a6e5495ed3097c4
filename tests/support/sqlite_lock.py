"""Another connection holding SQLite's write lock, as a request-log batch or another worker's claim does."""

from __future__ import annotations

import sqlite3
import threading


class WriteLock:
    """Takes the write lock of the SQLite file at `path` now (BEGIN IMMEDIATE) and holds it until `release()`, or
    for `seconds` when given (released from a timer thread; `join()` waits for that). Usable from any thread."""

    def __init__(self, path: str, seconds: float | None = None) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("BEGIN IMMEDIATE")
        self._mutex = threading.Lock()
        self.held = True
        self._timer = threading.Timer(seconds, self.release) if seconds is not None else None
        if self._timer is not None:
            self._timer.start()

    def release(self) -> None:
        with self._mutex:
            if self.held:
                self._conn.execute("COMMIT")
                self._conn.close()
                self.held = False

    def join(self) -> None:
        """Wait until the timer released the lock (at once without a timer)."""
        if self._timer is not None:
            self._timer.join()

    def __enter__(self) -> WriteLock:
        return self

    def __exit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.release()
