"""A bounded background load for fault tests: a few client threads sending chat requests (some in sessions)
until stopped, each with an x-request-id of a known prefix so the test can count its rows in the request log."""

from __future__ import annotations

import itertools
import threading
from collections import Counter

import httpx
from sqlalchemy import text

from quantroute.db.engine import make_engine
from tests.router.conftest import MODEL, SENSITIVE, TOLERANT


class Load:
    def __init__(self, url: str, *, prefix: str, threads: int = 4, max_requests: int = 2000) -> None:
        self.url = url
        self.prefix = prefix
        self.statuses: Counter[int] = Counter()
        self.sent = 0
        self._ids = itertools.count()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._max = max_requests
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def _run(self, i: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as c:
            while not self._stop.is_set():
                with self._lock:
                    if self.sent >= self._max:
                        return
                    self.sent += 1
                    n = next(self._ids)
                headers = {"x-request-id": f"{self.prefix}-{n}"}
                if n % 3 == 0:
                    headers["x-session-id"] = f"{self.prefix}-s{i}-{n % 5}"
                try:
                    r = c.post("/v1/chat/completions", headers=headers, json={
                        "model": MODEL, "messages": SENSITIVE if n % 2 else TOLERANT, "max_tokens": 4})
                    self.statuses[r.status_code] += 1
                except httpx.HTTPError:
                    self.statuses[0] += 1

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)


def logged(db_url: str, prefix: str) -> int:
    eng = make_engine(db_url)
    try:
        with eng.connect() as c:
            return int(c.execute(text("SELECT COUNT(*) FROM request_log WHERE request_id LIKE :p"),
                                 {"p": f"{prefix}-%"}).scalar_one())
    finally:
        eng.dispose()
