"""A node's Prometheus metrics under vLLM's names and labels, in a registry of its own (one per node, so several
nodes can live in one process). Durations are in simulated seconds: what the same node would report on a GPU."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# vLLM's bucket boundaries (vllm/engine/metrics.py, v0.6-0.8).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
LABELS = ("model_name", "engine")
# vLLM's (v1) prefix-cache counters, in tokens; exposed with the `_total` suffix (checked in tests/vllm)
PREFIX_CACHE_COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits")
SIM_CLOCK = "quantroute_sim_clock_seconds"


class NodeMetrics:
    def __init__(self, *, model_name: str, engine: str = "0"):
        self.registry = CollectorRegistry()
        self._labels = {"model_name": model_name, "engine": engine}
        r = self.registry
        self._running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", LABELS,
                              registry=r)
        self._waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", LABELS,
                              registry=r)
        self._kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", LABELS, registry=r)
        # The pre-0.10 name of the same gauge, which older dashboards and routers still scrape.
        self._gpu_cache = Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", LABELS,
                                registry=r)
        # Not a vLLM series: the simulated seconds this node has lived. Rates over it (tokens per simulated
        # second) leave out the host stalls the engine forgives, which a rate over the wall clock counts.
        self._clock = Gauge(SIM_CLOCK, "Simulated seconds since the node started (simulator only).", LABELS,
                            registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", LABELS,
                                     registry=r).labels(**self._labels)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", LABELS,
                                         registry=r).labels(**self._labels)
        # Automatic prefix caching, in tokens as vLLM (v1) counts them: every prompt token looked up, and those found.
        self.prefix_cache_queries = Counter(PREFIX_CACHE_COUNTERS[0], "Prefix cache queries, in terms of number of "
                                            "queried tokens.", LABELS, registry=r).labels(**self._labels)
        self.prefix_cache_hits = Counter(PREFIX_CACHE_COUNTERS[1], "Prefix cache hits, in terms of number of cached "
                                         "tokens.", LABELS, registry=r).labels(**self._labels)
        self._success = Counter("vllm:request_success", "Count of successfully processed requests.",
                                (*LABELS, "finished_reason"), registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              LABELS, buckets=TTFT_BUCKETS, registry=r).labels(**self._labels)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             LABELS, buckets=ITL_BUCKETS, registry=r).labels(**self._labels)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.",
                             LABELS, buckets=REQUEST_BUCKETS, registry=r).labels(**self._labels)
        self.queue_time = Histogram("vllm:request_queue_time_seconds",
                                    "Histogram of time spent in WAITING phase for request.", LABELS,
                                    buckets=REQUEST_BUCKETS, registry=r).labels(**self._labels)

    def bind_state(self, *, running: Callable[[], float], waiting: Callable[[], float],
                   kv_usage: Callable[[], float], clock: Callable[[], float]) -> None:
        """Gauges read the engine's state when scraped, so they can never drift from it."""
        self._clock.labels(**self._labels).set_function(clock)
        self._running.labels(**self._labels).set_function(running)
        self._waiting.labels(**self._labels).set_function(waiting)
        self._kv.labels(**self._labels).set_function(kv_usage)
        self._gpu_cache.labels(**self._labels).set_function(kv_usage)

    def success(self, finished_reason: str) -> None:
        self._success.labels(finished_reason=finished_reason, **self._labels).inc()

    def render(self) -> bytes:
        # vLLM turns prometheus_client's `*_created` series off; drop them too so scrapers see vLLM's shape
        # (done per render, not with the process-global switch, so other registries are left alone).
        text = generate_latest(self.registry)
        return b"".join(line for line in text.splitlines(keepends=True) if not _metric_name(line).endswith(b"_created"))


def _metric_name(line: bytes) -> bytes:
    """The metric a exposition line is about: `# HELP name ...`, `# TYPE name ...` or `name{labels} value`."""
    if line.startswith(b"#"):
        parts = line.split(b" ", 3)
        return parts[2] if len(parts) > 2 else b""
    return line.split(b"{", 1)[0].split(b" ", 1)[0]
