"""Prometheus metrics for one router app (its own CollectorRegistry: several apps can live in one process)."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from quantroute.router.metrics.series import LATENCY_BUCKETS, PinSeries, PinTouchCounts, RequestSeries

# LATENCY_BUCKETS: the shadow metrics use them too
__all__ = ["LATENCY_BUCKETS", "RouterMetrics", "build_version", "merge_worker_metrics"]


def build_version() -> str:
    try:
        return version("quantroute")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"



class RouterMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self._node_series: set[tuple[str, str, str]] = set()
        # declared in this order, which is the order /metrics shows them in
        self._declare_process(r)
        self._declare_routing(r)
        self._declare_nodes(r)
        self._declare_pins(r)
        self._declare_upkeep(r)

    def _declare_process(self, r: CollectorRegistry) -> None:
        """Requests, the cyclic GC and what build runs."""
        # requests, their duration, TTFT, tokens and decision time: plain numbers rendered at scrape time
        self.series = RequestSeries()
        r.register(self.series)
        self.decision_seconds = self.series.decision
        # python_gc_collections_total and the objects collected, per generation: whether the cyclic GC stops the
        # event loop often (see GC_YOUNG_THRESHOLD in router/heap.py); read at scrape time from gc.get_stats()
        GCCollector(registry=r)
        self.build_info = Gauge("quantroute_build_info", "Always 1; the labels say what runs",
                                ["version", "python"], registry=r)
        self.build_info.labels(build_version(), platform.python_version()).set(1)

    def _declare_routing(self, r: CollectorRegistry) -> None:
        """Upstream failures, retries, escalations, waits and 503s for capacity."""
        self.upstream_errors = Counter("quantroute_upstream_errors_total", "Failed upstream attempts",
                                       ["tier", "kind"], registry=r)
        self.retries = Counter("quantroute_retries_total", "Requests retried on another node", ["tier"], registry=r)
        self.escalations = Counter("quantroute_escalations_total", "Unpinned requests sent to a higher tier",
                                   ["from_tier", "to_tier"], registry=r)
        self.session_waits = Counter("quantroute_session_waits_total", "Requests that waited for capacity",
                                     ["tier"], registry=r)
        self.no_capacity = Counter("quantroute_no_capacity_total", "503s for lack of capacity",
                                   ["tier", "pinned"], registry=r)

    def _declare_nodes(self, r: CollectorRegistry) -> None:
        """Nodes, the policy and the request log."""
        self.node_healthy = Gauge("quantroute_node_healthy", "1 when the node takes traffic",
                                  ["node", "deployment", "tier"], registry=r)
        self.node_inflight = Gauge("quantroute_node_inflight", "Router in-flight requests per node",
                                   ["node"], registry=r)
        self.policy_version = Gauge("quantroute_policy_version", "Active policy version", registry=r)
        self.reload_failures = Counter("quantroute_policy_reload_failures_total", "Rejected policy loads",
                                       registry=r)
        self.log_dropped = Counter("quantroute_request_log_dropped_total",
                                   "Request log rows dropped, by reason: buffer_full (DB slow or down), rejected "
                                   "(the DB refused the row), shutdown (not written before exit)",
                                   ["reason"], registry=r)
        for reason in ("buffer_full", "rejected", "shutdown"):  # present at 0, so alerts see a rate from the start
            self.log_dropped.labels(reason)

    def _declare_pins(self, r: CollectorRegistry) -> None:
        """Session pins and node affinity."""
        self.pin_fallbacks = Counter("quantroute_pin_deployment_fallbacks_total",
                                     "Pinned sessions moved to another deployment of their tier",
                                     ["tier", "reason"], registry=r)
        self.pins_purged = Counter("quantroute_session_pins_purged_total", "Expired session pins deleted",
                                   registry=r)
        self.pin_conflicts = Counter("quantroute_pin_conflicts_total",
                                     "First turns re-routed: another replica or worker stored the session's pin "
                                     "first with another tier, arm or deployment", registry=r)
        self.affinity = Counter("quantroute_node_affinity_total",
                                "Pinned turns under node affinity, by outcome: kept (the session's last node served "
                                "it) or fallback_gone / _failed / _unhealthy / _busy (the least-loaded node did)",
                                ["tier", "outcome"], registry=r)
        self.affinity_moves = Counter("quantroute_node_affinity_moves_total",
                                      "First turns on this replica re-routed to the node another replica served the "
                                      "session's last turn on (node affinity)", registry=r)
        # a pin batch's size and time, an answer's wait for its pin: plain numbers too (at c=1 on PostgreSQL every
        # first turn observes all three)
        self.pins = PinSeries()
        r.register(self.pins)
        self.pin_touches = PinTouchCounts()
        r.register(self.pin_touches)

    def _declare_upkeep(self, r: CollectorRegistry) -> None:
        """Refused requests, background loops, the log's buffer and healthy nodes per model."""
        self.rejected = Counter("quantroute_requests_rejected_total",
                                "Requests refused before routing: concurrency (replica at its limit), body_timeout",
                                ["reason"], registry=r)
        self.task_crashes = Counter("quantroute_background_task_restarts_total",
                                    "Background loops that crashed (or returned) and were restarted", ["task"],
                                    registry=r)
        self.log_buffered = Gauge("quantroute_request_log_buffered", "Request log rows waiting", registry=r)
        # For dashboards and alerts (deploy/grafana, deploy/prometheus): per-tier latency, TTFT and tokens, and
        # healthy nodes per model and tier (the alert "no healthy node for a model" needs the model label).
        self.healthy_nodes = Gauge("quantroute_healthy_nodes", "Healthy nodes per model and tier",
                                   ["model", "tier"], registry=r)

    def finished(self, tier: str, deployment: str, arm: str, status: int, latency_s: float, out) -> None:
        """One finished request: its count, and latency, TTFT and tokens under its tier and deployment."""
        self.series.finished(tier, deployment, arm, status, latency_s, out.ttft, out.prompt_tokens,
                             out.completion_tokens)

    def task_crashes_inc(self, task: str) -> None:
        self.task_crashes.labels(task).inc()

    def log_dropped_rows(self, reason: str, n: int) -> None:
        self.log_dropped.labels(reason).inc(n)

    def render(self, fleet, writer) -> bytes:
        healthy: dict[tuple[str, str], int] = {}
        seen = set()
        for n in fleet.nodes.values():
            labels = (n.key, n.deployment, n.tier.value)
            seen.add(labels)
            self.node_healthy.labels(*labels).set(1 if n.available else 0)
            self.node_inflight.labels(n.key).set(n.inflight)
            key = (n.model, n.tier.value)
            healthy[key] = healthy.get(key, 0) + (1 if n.healthy else 0)
        self.healthy_nodes.clear()
        for (model, tier), count in healthy.items():
            self.healthy_nodes.labels(model, tier).set(count)
        # a removed node (or one that moved deployment) leaves no stale series behind
        for labels in self._node_series - seen:
            self.node_healthy.remove(*labels)
            if labels[0] not in {k for k, _, _ in seen}:
                self.node_inflight.remove(labels[0])
        self._node_series = seen
        self.log_buffered.set(len(writer.buffer))
        return generate_latest(self.registry)


class _Families:
    """A collector that yields families already built (generate_latest renders any collector)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def merge_worker_metrics(answered: list[tuple[str, bytes]], silent: Sequence[str] = ()) -> bytes:
    """One exposition for a router of several workers: every worker's series under a `worker` label (each
    counter stays monotonic per worker, so rate() and increase() hold across a worker's restart; a sum without
    the label adds up the host), and `quantroute_router_worker_up` 1 for each worker in `answered`, 0 for each
    in `silent` (asked, did not answer in time)."""
    families: dict[str, Metric] = {}
    for worker, text in answered:
        for fam in text_string_to_metric_families(text.decode()):
            into = families.get(fam.name)
            if into is None:
                into = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            into.samples.extend(Sample(s.name, {"worker": worker, **s.labels}, s.value, s.timestamp, s.exemplar)
                                for s in fam.samples)
    up = Metric("quantroute_router_worker_up", "1 for each worker of this router that answered this scrape, 0 for "
                "one asked that did not (its series are missing from this scrape)", "gauge")
    up.samples.extend([Sample(up.name, {"worker": w}, 1.0) for w, _ in answered]
                      + [Sample(up.name, {"worker": w}, 0.0) for w in silent])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*families.values(), up]))
    return generate_latest(registry)

