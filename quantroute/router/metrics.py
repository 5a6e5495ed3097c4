"""Prometheus metrics for one router app (its own CollectorRegistry: several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class RouterMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("quantroute_requests_total", "Requests routed",
                                ["tier", "deployment", "arm", "status"], registry=r)
        self.decision_seconds = Histogram(
            "quantroute_decision_seconds", "Time to decide tier and node (excluding waits)",
            buckets=(2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2), registry=r)
        self.upstream_errors = Counter("quantroute_upstream_errors_total", "Failed upstream attempts",
                                       ["tier", "kind"], registry=r)
        self.retries = Counter("quantroute_retries_total", "Requests retried on another node", ["tier"], registry=r)
        self.escalations = Counter("quantroute_escalations_total", "Unpinned requests sent to a higher tier",
                                   ["from_tier", "to_tier"], registry=r)
        self.session_waits = Counter("quantroute_session_waits_total", "Requests that waited for capacity",
                                     ["tier"], registry=r)
        self.no_capacity = Counter("quantroute_no_capacity_total", "503s for lack of capacity",
                                   ["tier", "pinned"], registry=r)
        self.node_healthy = Gauge("quantroute_node_healthy", "1 when the node takes traffic",
                                  ["node", "deployment", "tier"], registry=r)
        self.node_inflight = Gauge("quantroute_node_inflight", "Router in-flight requests per node",
                                   ["node"], registry=r)
        self.policy_version = Gauge("quantroute_policy_version", "Active policy version", registry=r)
        self.reload_failures = Counter("quantroute_policy_reload_failures_total", "Rejected policy loads",
                                       registry=r)
        self.log_dropped = Counter("quantroute_request_log_dropped_total", "Request log rows dropped",
                                   registry=r)
        self.pin_fallbacks = Counter("quantroute_pin_deployment_fallbacks_total",
                                     "Pinned sessions moved to another deployment of their tier",
                                     ["tier", "reason"], registry=r)
        self.pins_purged = Counter("quantroute_session_pins_purged_total", "Expired session pins deleted",
                                   registry=r)
        self.pin_conflicts = Counter("quantroute_pin_conflicts_total",
                                     "First turns re-routed: another replica or worker stored the session's pin "
                                     "first with another tier, arm or deployment", registry=r)
        self.pin_batch = Histogram("quantroute_pin_commit_batch_size", "New session pins stored per transaction",
                                   buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=r)
        self.log_buffered = Gauge("quantroute_request_log_buffered", "Request log rows waiting", registry=r)

    def render(self, fleet, writer) -> bytes:
        for n in fleet.nodes.values():
            self.node_healthy.labels(n.key, n.deployment, n.tier.value).set(1 if n.healthy else 0)
            self.node_inflight.labels(n.key).set(n.inflight)
        self.log_buffered.set(len(writer.buffer))
        return generate_latest(self.registry)
