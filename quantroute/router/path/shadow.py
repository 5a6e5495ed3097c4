"""Shadow requests: a sampled share of eligible greedy requests is sent a second time, to another
deployment, once the client has its answer; the two answers are compared and the pair stored.

Nothing on the request path awaits a shadow. `sample` (before forwarding) only decides whether to keep a copy of
the served answer; `launch` (after the client got the whole response) starts a task and returns. Each shadow has
its own timeout; at most `max_concurrent` run per replica, and only to a node under `max_target_load`. Shadow
requests never enter the request log, the per-minute rollup, a node's in-flight count or the request metrics:
they have their own table (shadow_pair), their own metrics (quantroute_shadow_*) and their own in-flight count
per node, so no user-traffic figure (guards, rollups, capacity, request stats) counts them."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from sqlalchemy.engine import Engine

from quantroute.db.shadow_pair import COLUMNS, ShadowPair
from quantroute.policy.model import Shadow
from quantroute.router.metrics.registry import LATENCY_BUCKETS
from quantroute.router.nodes.pool import Node, NodePool
from quantroute.router.nodes.upstream import UpstreamError
from quantroute.router.path.canary import BASELINE, CANDIDATE
from quantroute.router.path.forward import FORWARD_HEADERS, upstream_headers
from quantroute.router.path.route import Route
from quantroute.router.path.select import load
from quantroute.router.requestlog.privacy import PromptStorage, redact_text, replay_record
from quantroute.router.requestlog.writer import RequestLogWriter
from quantroute.shadow.compare import compare
from quantroute.shadow.response import Answer, read_answer
from quantroute.tiers import Tier

log = logging.getLogger(__name__)


class ShadowMetrics:
    """The shadow's own series, on the router's registry: never mixed into the request metrics."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.requests = Counter("quantroute_shadow_requests_total", "Shadow requests sent, by outcome: compared, "
                                "error (no comparable answer), timeout", ["served_tier", "shadow_tier", "outcome"],
                                registry=r)
        self.skipped = Counter("quantroute_shadow_skipped_total", "Sampled requests not shadowed: busy "
                               "(max_concurrent reached), target_load (every target node above max_target_load), "
                               "no_target, served_failed, too_large", ["reason"], registry=r)
        for reason in ("busy", "target_load", "no_target", "served_failed", "too_large"):
            self.skipped.labels(reason)
        self.agreement = Counter("quantroute_shadow_pairs_total", "Compared shadow pairs, by verdict",
                                 ["served_tier", "shadow_tier", "agree"], registry=r)
        self.inflight = Gauge("quantroute_shadow_inflight", "Shadow requests in flight on this replica", registry=r)
        self.node_inflight = Gauge("quantroute_node_shadow_inflight", "Shadow requests in flight per node",
                                   ["node"], registry=r)
        self.duration = Histogram("quantroute_shadow_duration_seconds", "End-to-end time of shadow requests",
                                  ["tier", "deployment"], buckets=LATENCY_BUCKETS, registry=r)
        self.dropped = Counter("quantroute_shadow_log_dropped_total", "Shadow pair rows dropped, by reason",
                               ["reason"], registry=r)

    def log_dropped_rows(self, reason: str, n: int) -> None:
        self.dropped.labels(reason).inc(n)


class ShadowLogWriter(RequestLogWriter):
    """The request log's batching, bounds and isolation of refused rows, into shadow_pair (and no rollup)."""

    table_model = ShadowPair
    columns = COLUMNS
    json_columns = ("rules", "bodies")
    rollup = False


def eligible(spec: Shadow, data: Any, body_bytes: int) -> bool:
    """Greedy enough, small enough, and a stream only when the policy allows streams."""
    if not isinstance(data, dict):
        return False
    t = data.get("temperature", 1.0)  # unset: the OpenAI default, 1.0
    if isinstance(t, bool) or not isinstance(t, (int, float)) or t > spec.max_temperature:
        return False
    if data.get("stream") and not spec.streams:
        return False
    if body_bytes > spec.max_request_bytes or data.get("n", 1) not in (1, None):
        return False
    wanted = data.get("max_completion_tokens") or data.get("max_tokens")
    if spec.max_output_tokens is not None and isinstance(wanted, int) and wanted > spec.max_output_tokens:
        return False
    return True


@dataclass(slots=True)
class ShadowJob:
    """A sampled request: where its shadow may go (deployments at one tier), decided before forwarding."""

    spec: Shadow
    kind: str  # tier | canary
    tier: Tier
    deployments: tuple[str, ...]


def target_for(spec: Shadow, route: Route) -> ShadowJob | None:
    """The first pair of the policy that applies to this route, as a job; None when none does."""
    ap = route.policy
    canary = ap.policy.canary_for(route.model)
    for pair in spec.pairs:
        if pair.canary:
            if canary is None or canary.percent <= 0 or route.arm not in (BASELINE, CANDIDATE):
                continue
            other = canary.baseline if route.arm == CANDIDATE else canary.candidate
            tier = ap.deployment_tier.get(other)
            if tier is not None:
                return ShadowJob(spec, "canary", tier, (other,))
        elif route.tier in pair.served and pair.shadow is not None:
            deps = ap.deployments(route.model, pair.shadow, None)  # no arm: the canary's candidate left out
            if deps:
                return ShadowJob(spec, "tier", pair.shadow, deps)
    return None


class Shadower:
    def __init__(self, fleet: NodePool, *, engine: Engine | None, storage: PromptStorage, log_batch_size: int,
                 flush_interval_s: float, registry: CollectorRegistry, rng: random.Random | None = None,
                 forward_headers: frozenset[bytes] = FORWARD_HEADERS) -> None:
        self.fleet = fleet
        self.forward_headers = forward_headers
        self.storage = storage
        self.rng = rng or random.Random()
        self.metrics = ShadowMetrics(registry)
        self.writer = ShadowLogWriter(engine, batch_size=log_batch_size, flush_interval_s=flush_interval_s,
                                      max_buffered=5_000, max_buffered_bytes=32 * 1024 * 1024,
                                      on_drop=self.metrics.log_dropped_rows)
        self.upstream: Any = None  # set by the router at startup (the same upstream client as requests)
        self.inflight = 0
        self._tasks: set[asyncio.Task] = set()

    # -- before forwarding: sample --------------------------------------------------------------------------
    def sample(self, route: Route, data: Any, body_bytes: int) -> ShadowJob | None:
        spec = route.policy.policy.shadow
        if spec is None or spec.rate <= 0 or route.direct or not eligible(spec, data, body_bytes):
            return None
        if self.rng.random() >= spec.rate:
            return None
        return target_for(spec, route)

    # -- after the client's response: launch ------------------------------------------------------------------
    def pick(self, job: ShadowJob) -> tuple[Node | None, str]:
        nodes = [n for d in job.deployments for n in self.fleet.by_deployment.get(d, ())
                 if n.tier == job.tier and n.available]
        if not nodes:
            return None, "no_target"
        weighed = [(load(n) + n.shadow_inflight / n.speed, n) for n in nodes]
        ok = [(w, n) for w, n in weighed if w <= job.spec.max_target_load]
        if not ok:
            return None, "target_load"
        return min(ok, key=lambda wn: wn[0])[1], ""

    def launch(self, job: ShadowJob, *, route: Route, path: str, body: bytes, headers: list[tuple[bytes, bytes]],
               served: bytes | None, served_status: int, request_id: str, ts: datetime, data: Any,
               header_map: Mapping[str, str]) -> None:
        """Start the shadow of a request whose client already has the whole response; never waits."""
        if served_status != 200 or route.node is None:
            self.metrics.skipped.labels("served_failed").inc()
            return
        if served is None:
            self.metrics.skipped.labels("too_large").inc()
            return
        if self.inflight >= job.spec.max_concurrent:
            self.metrics.skipped.labels("busy").inc()
            return
        node, why = self.pick(job)
        if node is None:
            self.metrics.skipped.labels(why).inc()
            return
        self.inflight += 1
        node.shadow_inflight += 1
        self.metrics.inflight.set(self.inflight)
        self.metrics.node_inflight.labels(node.key).set(node.shadow_inflight)
        row = {"ts": ts, "request_id": request_id, "model": route.model, "policy_version": route.policy.version,
               "rules": list(route.decision.rule_names) if route.decision else [], "arm": route.arm,
               "kind": job.kind, "stream": bool(isinstance(data, dict) and data.get("stream")),
               "served_tier": route.node.tier.value, "served_deployment": route.node.deployment,
               "served_node": route.node.key, "shadow_tier": node.tier.value, "shadow_deployment": node.deployment,
               "shadow_node": node.key}
        task = asyncio.get_running_loop().create_task(
            self._run(job, node, path, body, upstream_headers(headers, self.forward_headers), served, row,
                      (data, header_map)),
            name=f"quantroute-shadow-{request_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, job: ShadowJob, node: Node, path: str, body: bytes, headers, served: bytes, row: dict,
                   request: tuple[Any, Mapping[str, str]]) -> None:
        started = time.perf_counter()
        status, raw, error, outcome = 0, b"", None, "error"
        try:
            async with asyncio.timeout(job.spec.timeout_s):
                resp = await self.upstream.post(node.url, path, body, headers)
                try:
                    status = resp.status_code
                    raw = await resp.aread()
                finally:
                    await resp.aclose()
        except TimeoutError:
            error, outcome = f"no complete answer within {job.spec.timeout_s:g}s", "timeout"
        except UpstreamError as e:
            error = str(e)
        except Exception as e:
            log.exception("shadow request to %s failed", node.key)
            error = f"{type(e).__name__}: {e}"
        finally:
            self.inflight -= 1
            node.shadow_inflight -= 1
            self.metrics.inflight.set(self.inflight)
            self.metrics.node_inflight.labels(node.key).set(node.shadow_inflight)
        latency = time.perf_counter() - started
        self.metrics.duration.labels(node.tier.value, node.deployment).observe(latency)
        mine, theirs = read_answer(served), read_answer(raw) if status == 200 else Answer(ok=False)
        if status and status != 200 and error is None:
            error = f"node answered {status}"
        row.update(shadow_status=status, shadow_latency_ms=latency * 1000, shadow_error=error,
                   served_tokens=mine.completion_tokens, shadow_tokens=theirs.completion_tokens,
                   compared=mine.ok and theirs.ok)
        if mine.ok and theirs.ok:
            outcome = "compared"
            c = compare(mine.text, theirs.text, served_tokens=mine.tokens, shadow_tokens=theirs.tokens,
                        completion_tokens=mine.completion_tokens)
            row.update(c.model_dump())
            self.metrics.agreement.labels(row["served_tier"], row["shadow_tier"], str(c.agree).lower()).inc()
        elif error is None:
            error = "the shadow's answer could not be read" if mine.ok else "the served answer could not be read"
            row["shadow_error"] = error
        self.metrics.requests.labels(row["served_tier"], row["shadow_tier"], outcome).inc()
        row["bodies"] = self._bodies(request, mine, theirs)
        if self.writer.engine is not None:  # a router without a database keeps only the metrics
            self.writer.add(row, nbytes=len(body) + len(mine.text) + len(theirs.text))

    def _bodies(self, request: tuple[Any, Mapping[str, str]], mine: Answer, theirs: Answer) -> dict | None:
        """What the prompt-storage setting lets us keep: nothing, or the request and both answers (redacted), as
        the request log keeps bodies (no header but the classifier's is ever kept; here none at all)."""
        kept = replay_record(request[0], request[1], storage=self.storage, allow=())
        if kept is None:
            return None
        text = redact_text if self.storage == "redacted" else (lambda s: s)
        return {"request": kept, "served": text(mine.text), "shadow": text(theirs.text)}

    async def close(self, timeout_s: float = 2.0) -> None:
        """Shutdown: shadows still running are abandoned (their pairs are not written), then the rows flushed."""
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.writer.close(timeout_s=timeout_s)
