"""What the fleet experiment reads off a running stack: the router's counters and every simulated node's vLLM-style
metrics (generated tokens, prefix-cache counters, in-flight requests) and its simulated clock, one scrape each."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from quantroute.sim.metrics import SIM_CLOCK


async def router_counters(client: httpx.AsyncClient, url: str) -> dict[str, float]:
    """Requests that waited for capacity, 503s for lack of it (all, pinned) from the router's metrics."""
    text = await scrape(client, url)
    out = {"requests": 0.0, "waits": 0.0, "pinned_503": 0.0, "no_capacity": 0.0}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "quantroute_requests_total":
                out["requests"] += s.value
            elif s.name == "quantroute_session_waits_total":
                out["waits"] += s.value
            elif s.name == "quantroute_no_capacity_total":
                out["no_capacity"] += s.value
                if s.labels.get("pinned") == "true":
                    out["pinned_503"] += s.value
    return out


GENERATED, PREFIX_QUERIES, PREFIX_HITS = ("vllm:generation_tokens_total", "vllm:prefix_cache_queries_total",
                                         "vllm:prefix_cache_hits_total")
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")


async def nodes_busy(client: httpx.AsyncClient, nodes: dict[str, str]) -> int:
    """Requests running or waiting on the nodes now, from their vLLM-style gauges."""
    return int(sum(sum(c.values()) for c in (await node_samples(client, nodes, IN_FLIGHT)).values()))


async def settle(client: httpx.AsyncClient, nodes: dict[str, str], timeout_s: float) -> int:
    """Wait until no node runs or queues a request, for at most `timeout_s`; what is still busy then. A run
    started on the same fleet right after another would otherwise count the earlier run's tokens in its first
    step, which then reads high enough to end the climb early as a plateau."""
    deadline = time.monotonic() + timeout_s
    while (busy := await nodes_busy(client, nodes)) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return busy


async def node_tokens(client: httpx.AsyncClient, nodes: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Per node: generated tokens so far (vLLM's counter) and the node's simulated clock, from one scrape."""
    counts = await node_samples(client, nodes, (GENERATED, SIM_CLOCK))
    return {n: (c[GENERATED], c[SIM_CLOCK]) for n, c in counts.items()}


@dataclass(frozen=True)
class NodeSpan:
    """What one node did over a measured window: tokens it generated and simulated seconds it lived through."""

    tokens: float
    sim_s: float


def node_spans(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]) -> dict[str, NodeSpan]:
    return {n: NodeSpan(after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in after}


async def scrape(client: httpx.AsyncClient, url: str) -> str:
    """GET /metrics, tried three times: a server busy with hundreds of streams can reset a scrape connection, and
    one it closed while idle (keep-alive timeout) can fail as it is reused."""
    for attempt in range(3):
        try:
            return (await client.get(url + "/metrics")).text
        except httpx.TransportError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


async def node_counters(client: httpx.AsyncClient, nodes: dict[str, str]) -> dict[str, dict[str, float]]:
    """Per node: generated tokens and prefix-cache queries and hits so far (vLLM's counter names)."""
    return await node_samples(client, nodes, (GENERATED, PREFIX_QUERIES, PREFIX_HITS))


async def node_samples(client: httpx.AsyncClient, nodes: dict[str, str],
                       names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per node: each named series summed over its labels, from one scrape."""
    async def one(url: str) -> dict[str, float]:
        text = await scrape(client, url)
        out = dict.fromkeys(names, 0.0)
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name in out:
                    out[s.name] += s.value
        return out
    values = await asyncio.gather(*(one(u) for u in nodes.values()))
    return dict(zip(nodes, values))
