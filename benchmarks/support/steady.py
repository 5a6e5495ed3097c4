"""The slices of a `router_overhead.py --steady` run: the pin cache filled first, then one wrk run per slice, each
printed as it ends with the router's RSS, the SQLite WAL's size and the share of turns that refreshed a pin."""

from __future__ import annotations

import time
from pathlib import Path

from support.cpus import rss_mb
from support.router_counters import router_counters
from support.wrk import run_wrk


def fill_pins(url: str, bench, rport: int, n: int) -> tuple[float, float]:
    """Send first turns (mode `new`) until the router has stored `n` pins more than before: a router that has
    served for a while holds its pin cache at the bound, and a steady run measures that state, not the filling.
    Returns (pins stored, seconds taken)."""
    started, before = time.monotonic(), router_counters(rport)["claimed"]
    stored = 0.0
    while stored < n:
        run_wrk(url, bench.script("new"), 32, 5)
        stored = router_counters(rport)["claimed"] - before
    return stored, time.monotonic() - started


def run_slices(bench, url: str, mode: str, rport: int, pid: int, wal: Path | None, *, seconds: float,
               slice_seconds: float, trace, rate: float) -> list[dict]:
    """`seconds` of `mode` at c=32 in slices of `slice_seconds` (`bench.run` each), printed as they end."""
    print(f"{'t s':>6}{'req/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}{'t/o':>5}{'RSS MB':>8}{'WAL MB':>8}"
          f"{'refreshed':>10}", flush=True)
    slices: list[dict] = []
    counters = router_counters(rport)
    started = time.monotonic()
    while time.monotonic() - started < seconds - 0.5:
        r = bench.run(url, mode, 32, slice_seconds, trace, rate)
        now = router_counters(rport)
        r["touched"] = (now["touched"] - counters["touched"]) / max(r["requests"], 1)
        counters = now
        r["t"], r["rss"] = time.monotonic() - started, rss_mb(pid)
        r["wal"] = wal.stat().st_size / 2**20 if wal is not None and wal.exists() else None
        slices.append(r)
        wal_mb = "-" if r["wal"] is None else f"{r['wal']:.1f}"
        print(f"{r['t']:>6.0f}{r['rps']:>9.0f}{r['p50_ms']:>8.3f}{r['p99_ms']:>8.3f}{r['errors']:>7}"
              f"{r['timeouts']:>5}{r['rss']:>8.1f}{wal_mb:>8}{r['touched'] * 100:>9.0f}%", flush=True)
    return slices
