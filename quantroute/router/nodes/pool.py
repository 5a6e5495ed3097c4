"""Fleet state: the nodes the router may send to, their health and their load.

Nodes come from the fleet file and from `POST /admin/nodes`. A node that re-registers with another format or
checksum starts a new generation: for the policy's quiescence window it takes only sessions pinned after
the generation started. Probes hit `/health` and scrape `/metrics` every `probe_interval_s`; consecutive
failures eject a node, one healthy probe brings it back."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime

import httpx
from prometheus_client.parser import text_string_to_metric_families

from quantroute.catalog import decode_steps_for
from quantroute.clock import utcnow
from quantroute.node import SERVED_FIELDS, NodeIdentity
from quantroute.tiers import Tier

log = logging.getLogger(__name__)

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # newer name first
# Weight of one answer in a node's latency averages: the last ~20 answers count, so a node's knee follows its load
# within a second or two at a busy node without one slow answer moving it
OBSERVE_ALPHA = 0.05
# Bounds of the observed / modelled TPOT ratio: prefill stalls and longer contexts than modelled push it up; a
# time-scaled simulator (or a clock) way off does not turn every node into one at its knee
MIN_SCALE, MAX_SCALE = 0.25, 16.0


@dataclass(eq=False)
class Node:
    key: str
    url: str
    model: str
    deployment: str
    tier: Tier
    format: str
    method: str = "none"
    checksum: str = ""
    hardware: str = "unknown"
    vram_gb: float | None = None
    speed: float = 1.0
    max_inflight: int = 256
    max_waiting: int = 64
    generation: int = 1
    generation_started: datetime = field(default_factory=utcnow)
    # observed
    healthy: bool = True
    failures: int = 0
    inflight: int = 0
    shadow_inflight: int = 0  # shadow requests (router.shadow) on this node: never part of `inflight`
    waiting: int = 0
    running: int = 0
    kv_usage: float = 0.0
    last_probe: float | None = None
    last_error: str | None = None
    draining: bool = False  # takes no new request; removed once its in-flight requests finished
    removed: bool = False
    # SLO-aware spill (router.path.spill): the capacity model's decode step per batch for this node's hardware and
    # format (None: not in the tables), and what its recent requests showed (moving averages, seconds)
    decode_steps: tuple[float, ...] | None = None
    tpot_s: float | None = None  # time per output token of recent streamed answers
    ttft_s: float | None = None  # time to first token of recent answers
    tpot_scale: float = 1.0  # observed TPOT over the capacity model's step at the batch it ran in

    def observe(self, *, ttft_s: float | None, tpot_s: float | None) -> None:
        """One finished answer's latency into the node's moving averages (a few float operations)."""
        if ttft_s is not None:
            self.ttft_s = ttft_s if self.ttft_s is None else self.ttft_s + OBSERVE_ALPHA * (ttft_s - self.ttft_s)
        if tpot_s is None:
            return
        self.tpot_s = tpot_s if self.tpot_s is None else self.tpot_s + OBSERVE_ALPHA * (tpot_s - self.tpot_s)
        steps = self.decode_steps
        if steps:
            modelled = steps[min(self.inflight + 1, len(steps) - 1)]
            ratio = min(max(tpot_s / modelled, MIN_SCALE), MAX_SCALE)
            self.tpot_scale += OBSERVE_ALPHA * (ratio - self.tpot_scale)

    @classmethod
    def from_identity(cls, ident: NodeIdentity, **state) -> Node:
        """A node as `ident` describes it, plus the router's own state (speed, limits, generation)."""
        return cls(key=ident.key, url=ident.base_url, **{f: getattr(ident, f) for f in SERVED_FIELDS}, **state)

    def identity(self) -> NodeIdentity:
        return NodeIdentity(url=self.url, node_id=self.key, **{f: getattr(self, f) for f in SERVED_FIELDS})

    @property
    def available(self) -> bool:
        return self.healthy and not self.draining

    def quiescent_for(self, pin_created: datetime, quiescence_s: int) -> bool:
        """True when a session pinned at `pin_created` must not use this node yet: the node's generation is
        newer than the pin and still inside its quiescence window."""
        if self.generation <= 1 or pin_created >= self.generation_started:
            return False
        return (utcnow() - self.generation_started).total_seconds() < quiescence_s

    def view(self) -> dict:
        return {"key": self.key, "url": self.url, "model": self.model, "deployment": self.deployment,
                "tier": self.tier.value, "format": self.format, "method": self.method, "checksum": self.checksum,
                "hardware": self.hardware, "vram_gb": self.vram_gb, "speed": self.speed,
                "generation": self.generation, "generation_started": self.generation_started.isoformat(),
                "healthy": self.healthy, "draining": self.draining, "consecutive_failures": self.failures,
                "inflight": self.inflight, "shadow_inflight": self.shadow_inflight,
                "waiting": self.waiting, "running": self.running, "kv_usage": self.kv_usage,
                "tpot_recent_ms": None if self.tpot_s is None else self.tpot_s * 1000,
                "ttft_recent_ms": None if self.ttft_s is None else self.ttft_s * 1000,
                "last_error": self.last_error}


class NodePool:
    """All known nodes, indexed by deployment. `epoch` changes whenever the set of nodes changes, so callers
    can cache candidate lists."""

    def __init__(self, *, max_inflight: int = 256, max_waiting: int = 64, eject_after: int = 3) -> None:
        self.nodes: dict[str, Node] = {}
        self.by_deployment: dict[str, list[Node]] = {}
        self.epoch = 0
        self.max_inflight = max_inflight
        self.max_waiting = max_waiting
        self.eject_after = eject_after
        self._capacity = asyncio.Event()
        self._capacity_waiters = 0

    # -- membership -------------------------------------------------------------------------------------
    def register(self, reg: NodeIdentity, *, speed: float | None = None,
                 generation_started: datetime | None = None) -> Node:
        """Add a node, or update the known one in place. In place, because the Node object is the identity
        that requests in flight hold and release: a new object per registration left their releases on the
        old one and inflated the new one's count for good."""
        key = reg.key
        node = self.nodes.get(key)
        started = generation_started or utcnow()
        # unknown hardware (speed None): as fast as the reference class; see catalog.speed_for
        state = dict(speed=speed or 1.0, max_inflight=self.max_inflight, max_waiting=self.max_waiting)
        same_hw = True
        if node is None:
            node = Node.from_identity(reg, generation=1, generation_started=started, **state)
            self.nodes[key] = node
        else:
            same_hw = (node.hardware, node.model, node.format) == (reg.hardware, reg.model, reg.format)
            same = node.format == reg.format and node.checksum == reg.checksum and node.deployment == reg.deployment
            if not same:
                node.generation += 1
                node.generation_started = started
            fresh = Node.from_identity(reg, **state)
            for f in ("url", *SERVED_FIELDS, *state):
                setattr(node, f, getattr(fresh, f))
        node.removed = False
        if node.decode_steps is None or not same_hw:
            node.decode_steps = decode_steps_for(node.hardware, node.model, node.format, node.max_inflight)
        self._reindex()
        return node

    def remove(self, key: str) -> Node | None:
        """Forget a node: no new request goes to it and probes stop. Requests already on it finish."""
        node = self.nodes.pop(key, None)
        if node is not None:
            node.removed = True
            self._reindex()
        return node

    def _reindex(self) -> None:
        idx: dict[str, list[Node]] = {}
        for n in self.nodes.values():
            idx.setdefault(n.deployment, []).append(n)
        self.by_deployment = idx
        self.epoch += 1
        self.notify()

    # -- capacity signalling ------------------------------------------------------------------------------
    def notify(self) -> None:
        """Wake requests waiting for capacity (a request finished, a node came back). Called once per request:
        a new Event only when someone waits on the current one."""
        if self._capacity_waiters:
            self._capacity.set()
            self._capacity = asyncio.Event()

    async def wait_for_capacity(self, timeout: float) -> None:
        ev = self._capacity
        self._capacity_waiters += 1
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._capacity_waiters -= 1

    # -- health -------------------------------------------------------------------------------------------
    def record_failure(self, node: Node, error: str) -> None:
        node.failures += 1
        node.last_error = error
        if node.failures >= self.eject_after and node.healthy:
            log.warning("ejecting node %s after %d failures: %s", node.key, node.failures, error)
            node.healthy = False
            self.epoch += 1

    def record_success(self, node: Node) -> None:
        node.failures = 0
        if not node.healthy:
            log.info("node %s is back", node.key)
            node.healthy = True
            self.epoch += 1
            self.notify()


def parse_load(text: str) -> tuple[int, int, float]:
    """(waiting, running, kv usage 0-1) summed over the label sets of vLLM's `/metrics`."""
    waiting = running = 0.0
    kv: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == WAITING:
                waiting += s.value
            elif s.name == RUNNING:
                running += s.value
            elif s.name in KV_USAGE:
                kv[s.name] = max(kv.get(s.name, 0.0), s.value)
    usage = next((kv[n] for n in KV_USAGE if n in kv), 0.0)
    return int(waiting), int(running), float(usage)


async def probe_node(client: httpx.AsyncClient, fleet: NodePool, node: Node, timeout: float) -> None:
    try:
        r = await client.get(node.url + "/health", timeout=timeout)
        if r.status_code != 200:
            raise RuntimeError(f"/health answered {r.status_code}")
        m = await client.get(node.url + "/metrics", timeout=timeout)
        if m.status_code == 200:
            node.waiting, node.running, node.kv_usage = parse_load(m.text)
    except Exception as e:  # noqa: BLE001 - any failure of a probe counts against the node
        fleet.record_failure(node, f"probe: {type(e).__name__}: {e}"[:300])
    else:
        node.last_error = None
        fleet.record_success(node)
        fleet.notify()
    node.last_probe = time.monotonic()


async def probe_loop(client: httpx.AsyncClient, fleet: NodePool, *, interval: float, timeout: float) -> None:
    while True:
        nodes = list(fleet.nodes.values())
        if nodes:
            await asyncio.gather(*(probe_node(client, fleet, n, timeout) for n in nodes))
        await asyncio.sleep(interval)
