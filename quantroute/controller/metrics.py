"""The controller's Prometheus metrics, in a registry of its own (no module-level state), served on a small
/metrics endpoint when `--metrics-port` is given. `quantroute_controller_last_pass_timestamp_seconds` is the
heartbeat an alert watches ("controller absent": no recent pass by any leader)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.last_pass = Gauge("quantroute_controller_last_pass_timestamp_seconds",
                               "Unix time of this controller's last finished pass", registry=r)
        self.leader = Gauge("quantroute_controller_leader", "1 while this controller holds the leader lock",
                            registry=r)
        self.passes = Counter("quantroute_controller_passes", "Passes finished, by role", ["role"], registry=r)
        self.actions = Counter("quantroute_controller_actions", "Rollout actions taken by this controller",
                               registry=r)
        self.errors = Counter("quantroute_controller_errors", "Reconciliations that raised", registry=r)
        self.webhook_failures = Counter("quantroute_controller_webhook_failures",
                                        "Webhook delivery attempts that failed", registry=r)
        self.webhook_delivered = Counter("quantroute_controller_webhook_deliveries",
                                         "Webhook notifications delivered", registry=r)

    def serve(self, port: int, host: str = "127.0.0.1"):
        """Start the /metrics server on a daemon thread; returns the server (its port when `port` was 0)."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        return server
