"""SLO-aware choice across tiers (pure): a request goes to the cheapest tier its policy allows unless that tier's
nodes are at their knee, where it spills **up** to a higher tier's node with headroom. Never down: the caller
passes only the tiers at or above the request's minimum, cheapest first.

A node's *pressure* is how close its next request comes to the SLO, 1.0 at the knee: the capacity model's decode
step at the batch the node would run (router in-flight + its queue + this request), times the ratio of the TPOT the
router observed on it to what the model predicted (prefill stalls, longer contexts), over the SLO's TPOT; at least
its recent TTFT over the SLO's TTFT; past the knee whenever requests queue inside it or its KV cache is full.

Within a tier the node is picked as before (`select.pick_node`: the lighter of two random nodes with room). Then:
- the cheapest tier with room, below its knee: served there;
- at its knee: the first tier above whose picked node is below its knee takes it ("spilled up: int4 at its knee");
- every tier at its knee: the cheapest tier keeps it. A higher tier past its knee has no headroom to lend: its
  room is what the requests that may only run there (their floor) wait for, so moving tolerant traffic into it
  makes them queue (measured in docs/experiments/fleet-mix.md: more waits at the router and 503s, not more
  capacity);
- no room on the cheapest tier: the next one with room, as escalation always did ("escalated: int4 full")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar

from quantroute.policy.model import Spill
from quantroute.router.path.select import NodeView, pick_node

KNEE = 1.0


class LoadView(NodeView, Protocol):
    decode_steps: tuple[float, ...] | None
    tpot_scale: float
    tpot_s: float | None
    ttft_s: float | None


@dataclass(frozen=True, slots=True)
class Target:
    """The SLO a node's next request should meet (seconds), from the policy's `spill` section."""

    tpot_s: float | None
    ttft_s: float | None
    max_kv_usage: float

    @classmethod
    def of(cls, spill: Spill) -> Target | None:
        """None when spill is off (the cheapest tier with room serves, as escalation always did)."""
        if not spill.enabled:
            return None
        return cls(tpot_s=spill.tpot_p95_ms / 1000 if spill.tpot_p95_ms else None,
                   ttft_s=spill.ttft_p95_ms / 1000 if spill.ttft_p95_ms else None, max_kv_usage=spill.max_kv_usage)


def modelled_step(steps: tuple[float, ...], batch: int) -> float:
    """The decode step at `batch` from the per-batch table, extended linearly past its end."""
    last = len(steps) - 1
    if batch <= last:
        return steps[batch]
    slope = steps[last] - steps[last - 1] if last >= 1 else 0.0
    return steps[last] + (batch - last) * slope


def pressure(node: LoadView, target: Target) -> float:
    """How close `node`'s next request comes to the SLO: below 1.0 it has headroom, 1.0 is its knee."""
    p = 0.0
    if target.tpot_s is not None:
        steps = node.decode_steps
        if steps:
            p = modelled_step(steps, node.inflight + node.waiting + 1) * node.tpot_scale / target.tpot_s
        elif node.tpot_s is not None:  # hardware or model not in the tables: what it showed lately
            p = node.tpot_s / target.tpot_s
    if target.ttft_s is not None and node.ttft_s is not None:
        p = max(p, node.ttft_s / target.ttft_s)
    if node.waiting > 0 or node.kv_usage >= target.max_kv_usage:  # a new sequence would queue inside it
        p = max(p, KNEE + node.waiting)
    return p


N = TypeVar("N", bound=LoadView)


class Choice(NamedTuple, Generic[N]):
    node: N | None
    at: int  # position in the ladder of the tier chosen
    reason: str | None = None  # why not the cheapest tier (None: served there)
    cheapest_full: bool = False  # the cheapest tier had no node with room


def below_knee(node: LoadView, target: Target | None) -> bool:
    """Whether the cheapest tier's picked node serves without a look at the others (spill off, or headroom)."""
    return target is None or pressure(node, target) < KNEE


def _name(tier: object) -> str:
    return str(getattr(tier, "value", tier))


def choose(names: Sequence[object], tiers: Sequence[Sequence[N]], target: Target | None, *,
           exclude: frozenset[str] | set[str] = frozenset(),
           rng: Callable[[int], int] | None = None) -> Choice[N]:
    """Node and tier for one request: `names` are the tiers it may use, cheapest first, and `tiers` their
    candidate nodes. `target` None: the cheapest tier with room (no spill). No node with room anywhere: node
    None."""
    first = -1
    node = None
    for i, nodes in enumerate(tiers):
        node = pick_node(nodes, exclude=exclude, rng=rng)
        if node is not None:
            first = i
            break
    if node is None:
        return Choice(None, 0, None, True)
    full = first > 0
    reason = f"escalated: {_name(names[0])} full" if full else None
    if target is None or first == len(tiers) - 1:  # no spill, or no tier above to spill to
        return Choice(node, first, reason, full)
    if pressure(node, target) < KNEE:
        return Choice(node, first, reason, full)
    for j in range(first + 1, len(tiers)):
        up = pick_node(tiers[j], exclude=exclude, rng=rng)
        if up is not None and pressure(up, target) < KNEE:
            return Choice(up, j, f"spilled up: {_name(names[first])} at its knee", full)
    return Choice(node, first, reason, full)
