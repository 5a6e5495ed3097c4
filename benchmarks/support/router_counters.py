"""A router's counters, read from its /metrics around a benchmark run: pins stored and batches
(`quantroute_pin_commit_batch_size`), the batches' claim time as the router times it
(`quantroute_pin_commit_seconds`: the database's work and the event loop's delay in reading its answer),
answers that waited for their pin and how long (`quantroute_pin_wait_seconds`; those that waited longer than its
top finite bucket, a second: a pin that took that long explains a client's timeout), and the cyclic GC's collections
per generation (`python_gc_collections_total`), and returning turns' pin refreshes written
(`quantroute_pin_touches_total`). With several workers one scrape carries every worker's series
(label `worker`), summed here."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from quantroute.router.metrics.series import PIN_SECONDS_BUCKETS

SAMPLES = {"quantroute_pin_commit_batch_size_sum": "claimed", "quantroute_pin_commit_batch_size_count": "batches",
           "quantroute_pin_commit_seconds_sum": "commit_s",
           "quantroute_pin_wait_seconds_count": "waited", "quantroute_pin_wait_seconds_sum": "wait_s"}
GENERATIONS = ("0", "1", "2")  # young, middle, full
WAIT_BUCKET = "quantroute_pin_wait_seconds_bucket"
SLOW_WAIT_S = PIN_SECONDS_BUCKETS[-1]  # the wait histogram's top finite bound: a wait past it is a slow one


def router_counters(port: int) -> dict[str, float]:
    """The counters as they stand (0 for any the router does not export); GC collections as gc0, gc1, gc2."""
    found = dict.fromkeys([*SAMPLES.values(), "waited_in_time", "touched", *(f"gc{g}" for g in GENERATIONS)], 0.0)
    for family in text_string_to_metric_families(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text):
        for s in family.samples:
            if s.name in SAMPLES:
                found[SAMPLES[s.name]] += s.value
            elif s.name == WAIT_BUCKET and float(s.labels["le"]) == SLOW_WAIT_S:
                found["waited_in_time"] += s.value
            elif s.name == "quantroute_pin_touches_total" and s.labels.get("outcome") == "written":
                found["touched"] += s.value
            elif s.name == "python_gc_collections_total":
                found[f"gc{s.labels['generation']}"] += s.value
            elif s.name == "quantroute_router_worker_up" and s.value != 1:
                raise RuntimeError(f"worker {s.labels['worker']} of the router on port {port} did not answer a "
                                   "scrape: the summed counters would miss its share")
    return found


def gc_figures(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
    """Over a run of `requests` between two readings: collections of each generation per 1,000 requests."""
    return {f"gc{g}_per_k": (after[f"gc{g}"] - before[f"gc{g}"]) / max(requests, 1) * 1000 for g in GENERATIONS}


def pin_figures(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
    """Over a run of `requests` between two readings: pins a batch, a batch's mean claim time (timed in the
    router), the share of requests whose ready answer waited for a pin (with a fixed session, the turns that
    arrived while its one pin was being stored) and their mean wait; nothing when the run claimed no pin."""
    d = {k: after[k] - before[k] for k in after}
    if not d["claimed"]:
        return {}
    return {"pins_per_batch": d["claimed"] / max(d["batches"], 1),
            "commit_ms": d["commit_s"] / max(d["batches"], 1) * 1000, "waited_share": d["waited"] / max(requests, 1),
            "wait_ms": d["wait_s"] / d["waited"] * 1000 if d["waited"] else 0.0}


def slow_waits(before: dict[str, float], after: dict[str, float]) -> float:
    """Answers that waited longer than SLOW_WAIT_S for their pin between two readings."""
    return (after["waited"] - after["waited_in_time"]) - (before["waited"] - before["waited_in_time"])
