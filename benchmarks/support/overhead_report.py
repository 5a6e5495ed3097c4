"""The tables router_overhead.py prints: one row per target and session mode (medians over rounds, spreads,
ratios against the direct run and the no-session mode), the one-pin claim floors, and a steady run's summary."""

from __future__ import annotations

import os
import statistics
from collections import defaultdict

from support.hop import describe
from support.router_counters import SLOW_WAIT_S
from support.sessions import TRACE_MODES


def steady_summary(slices: list[dict], counts: tuple[int, int]) -> None:
    rates = [r["rps"] for r in slices]
    median = statistics.median(rates)
    low = min(slices, key=lambda r: r["rps"])
    below = [f"{r['t']:.0f}" for r in slices if r["rps"] < 0.8 * median]
    wals = [r["wal"] for r in slices if r["wal"] is not None]
    print(f"median {median:.0f} req/s; slowest slice {low['rps']:.0f} at t={low['t']:.0f} s = "
          f"{low['rps'] / median:.2f}x the median; slices below 0.8x: {', '.join(below) or 'none'}")
    print(f"router RSS {slices[0]['rss']:.1f} MB after the first slice, {slices[-1]['rss']:.1f} MB at the end "
          f"({(slices[-1]['rss'] / slices[0]['rss'] - 1) * 100:+.1f} %); "
          + (f"WAL largest {max(wals):.1f} MB, at the end {wals[-1]:.1f} MB; " if wals else "")
          + f"errors {sum(r['errors'] for r in slices)}, timeouts {sum(r['timeouts'] for r in slices)}; "
          f"request_log rows {counts[0]}, session_pin rows {counts[1]}")


def _spread(values: list[float], fmt: str) -> str:
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}" if len(values) > 1 else "-"


def report(results: list[dict], *, rounds: int, peers: bool = False, think_ms: float = 0.0,
           floors: list[dict] | None = None, hop: dict[str, float] | None = None,
           key_check: dict[str, float] | None = None) -> None:
    """One row per target and session mode: medians over rounds, the spread of req/s, and ratios against the
    same round's direct run and the same configuration's `none` mode; then the databases' one-pin claims timed
    alone (`floors`) next to what a first turn added over `none` at c=1. `hop`: support/hop.py's round trips,
    measured before the run (a c=1 figure pays for each hop the router adds)."""
    by_round = {(r["round"], r["label"], r.get("mode", "none")): r for r in results if "unavailable" not in r}
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in results:
        groups[(r["label"], r.get("mode", "none"))].append(r)
    print(f"\nmachine: {os.cpu_count()} cores shared with the load generator (wrk, 1 thread) and other work: "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end. Medians of {rounds} round(s).")
    if hop:
        print(f"hops: {describe(hop)} (before the run; each hop the router adds is paid at c=1)")
    print(f"backend: waits {think_ms:g} ms before each completion's first byte" if think_ms else
          "backend: answers at once (~0.1 ms); --think-ms N stands in for a model's time")
    print(f"{'target':<30}{'sessions':<10}{'p50 ms':>8}{'+p50':>7}{'p99 ms':>8}{'req/s@32':>10}{'spread':>13}"
          f"{'x none':>7}{'x direct':>9}{'CPU us':>8}{'DB us':>7}{'+TTFB':>7}{'errors':>7}{'t/o':>5}{'pins':>8}")
    for (label, mode), rows in groups.items():
        if "unavailable" in rows[0]:
            print(f"{label:<30}  not measured: {rows[0]['unavailable']}")
            continue
        direct = [by_round[(r["round"], "direct (backend)", "none")] for r in rows]
        base = [by_round.get((r["round"], label, "none"), r) for r in rows]

        def med(key, rs=rows):
            return statistics.median(x[key] for x in rs)

        add_p50 = statistics.median(r["p50_ms"] - d["p50_ms"] for r, d in zip(rows, direct))
        add_ttfb = statistics.median(r["ttfb_ms"] - d["ttfb_ms"] for r, d in zip(rows, direct))
        x_none = statistics.median(r["rps32"] / b["rps32"] for r, b in zip(rows, base))
        x_direct = statistics.median(r["rps32"] / d["rps32"] for r, d in zip(rows, direct))
        pins = str(rows[-1]["pins"]) if "pins" in rows[-1] else "-"
        cpus = [r["cpu_us"] for r in rows if r.get("cpu_us") is not None]
        cpu = f"{statistics.median(cpus):.0f}" if cpus else "-"
        db_cpus = [r["db_cpu_us"] for r in rows if r.get("db_cpu_us") is not None]
        db_cpu = f"{statistics.median(db_cpus):.0f}" if db_cpus else "-"
        print(f"{label:<30}{mode:<10}{med('p50_ms'):>8.3f}{add_p50:>7.3f}{med('p99_ms'):>8.3f}{med('rps32'):>10.0f}"
              f"{_spread([r['rps32'] for r in rows], '{:.0f}'):>13}{x_none:>7.2f}{x_direct:>9.2f}{cpu:>8}{db_cpu:>7}"
              f"{add_ttfb:>7.3f}"
              f"{sum(r['errors'] for r in rows):>7}{sum(r['timeouts'] for r in rows):>5}{pins:>8}")
    pin_rows = [(label, mode, rows) for (label, mode), rows in groups.items()
                if any("pins_per_batch" in r for r in rows)]
    if pin_rows:
        print("pins at c=32 (all workers, from /metrics): pins a batch, a batch's mean claim time (timed in "
              "the router: the database and the loop's delay in reading its answer), share of requests whose ready "
              f"answer waited for its session's pin, mean wait of those; answers that waited over {SLOW_WAIT_S:g} s "
              "at c=1 and c=32, all rounds (a client timeout is 2 s)")
        for label, mode, rows in pin_rows:
            rs = [r for r in rows if "pins_per_batch" in r]
            print(f"{label:<30}{mode:<9}{statistics.median(r['pins_per_batch'] for r in rs):>8.1f} pins/batch "
                  f"{statistics.median(r['commit_ms'] for r in rs):>7.3f} ms a batch "
                  f"{statistics.median(r['waited_share'] for r in rs) * 100:>5.0f} % waited "
                  f"{statistics.median(r['wait_ms'] for r in rs):>7.3f} ms "
                  f"{sum(r.get('slow_waits', 0) for r in rs):>5.0f} over {SLOW_WAIT_S:g} s")
    trace_rows = [(label, mode, [r for r in rows if "touch_share" in r]) for (label, mode), rows in groups.items()
                  if mode in TRACE_MODES and any("touch_share" in r for r in rows)]
    if trace_rows:
        print("returning and chat at c=32: share of requests whose turn refreshed its pin (written in batches; "
              "the rest were within the touch interval), and of chat turns that were first turns")
        for label, mode, rs in trace_rows:
            firsts = [r["first_share"] for r in rs if "first_share" in r]
            print(f"{label:<30}{mode:<10}{statistics.median(r['touch_share'] for r in rs) * 100:>5.0f} % refreshed"
                  + (f"{statistics.median(firsts) * 100:>6.0f} % first turns" if firsts else ""))
    gc_rows = [(label, mode, [r for r in rows if "gc0_per_k" in r]) for (label, mode), rows in groups.items()
               if any("gc0_per_k" in r for r in rows)]
    if gc_rows:
        print("cyclic GC at c=32 (all workers' collections added, from /metrics): collections of the young, middle "
              "and oldest generation per 1,000 requests")
        for label, mode, rs in gc_rows:
            print(f"{label:<30}{mode:<9}" + "".join(f"{statistics.median(r[f'gc{g}_per_k'] for r in rs):>8.2f}"
                                                   for g in "012"))
    if floors:
        report_floors(floors, by_round)
    if key_check:
        print(f"client key check alone (support/key_check.py, in-process, one key among {key_check['keys']:.0f}, "
              f"key and tenant rate limits): {key_check['p50_us']:.2f} us a request "
              f"({key_check['min_us']:.2f}-{key_check['max_us']:.2f}); target: the key check adds <= 0.02 ms "
              "p50 at c=1 and <= 3 % req/s at c=32 (row keys against none)")
    if peers:
        from support.peers import REFERENCE

        print("reference figures quoted for the peers (not measured here): "
              + "; ".join(f"{k} {v}" for k, v in REFERENCE.items()))
    print("+p50/+TTFB: added to the direct run of the same round (ms). x none: req/s@32 over the same "
          "configuration's no-session mode. CPU us: the target's CPU time (all its processes and threads) per "
          "request at c=32. DB us: the PostgreSQL server's (all its processes) per request at c=32, when it runs "
          "on this host. pins: session_pin rows the last round's router left.")
    print("targets: new sessions within 1.3x of none; >= 3,500 req/s@32; +p50 <= 0.35 ms; "
          "p99 <= 2 ms at c=1; no timeouts")
    for kept in sorted({r["kept_log"] for r in results if "kept_log" in r}):
        print(f"kept: the log of a router whose runs had errors or timeouts: {kept}")


def report_floors(floors: list[dict], by_round: dict[tuple, dict]) -> None:
    """Per database: the one-pin claim timed alone (p50, p99; PostgreSQL also `SELECT 1`, the round trip alone),
    and what a first turn added over the same one-worker router's `none` mode at c=1, both medians over rounds.
    A first turn at c=1 answers once its pin is stored, so the claim alone is the part of that addition that the
    database and the host set; the backend's own time (~0.1 ms) overlaps it, the router's work does not."""
    print(f"one-pin claims timed alone ({floors[0]['n']} in a row through the router's claim path, nothing else "
          "running) next to a first turn's added p50 at c=1 over no session (one worker), ms:")
    print(f"{'database':<18}{'claim p50':>10}{'claim p99':>10}{'SELECT 1':>10}{'new - none':>12}")
    per_db: dict[str, list[dict]] = defaultdict(list)
    for f in floors:
        per_db[f["db"]].append(f)
    for name, fs in per_db.items():
        label = fs[0]["router"]
        added = [by_round[(f["round"], label, "new")]["p50_ms"] - by_round[(f["round"], label, "none")]["p50_ms"]
                 for f in fs if (f["round"], label, "new") in by_round and (f["round"], label, "none") in by_round]
        sel = [f["select1_p50_ms"] for f in fs if "select1_p50_ms" in f]
        print(f"{name:<18}{statistics.median(f['claim_p50_ms'] for f in fs):>10.3f}"
              f"{statistics.median(f['claim_p99_ms'] for f in fs):>10.3f}"
              f"{(f'{statistics.median(sel):.3f}' if sel else '-'):>10}"
              f"{(f'{statistics.median(added):.3f}' if added else '-'):>12}")
