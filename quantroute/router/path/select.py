"""Pure choice of a tier and a node. No I/O: callers pass snapshots of node state.

Load of a node = router in-flight + scraped waiting + KV pressure, divided by the node's hardware speed
factor. Power of two choices: sample two candidates, keep the lighter; ties and single candidates are fine."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

# A node at 100% KV-cache usage counts as this many extra queued requests.
KV_PRESSURE_WEIGHT = 8.0


class NodeView(Protocol):
    key: str
    inflight: int
    waiting: int
    kv_usage: float
    speed: float
    max_inflight: int
    max_waiting: int

    @property
    def available(self) -> bool: ...


def load(node: NodeView) -> float:
    return (node.inflight + node.waiting + KV_PRESSURE_WEIGHT * node.kv_usage) / node.speed


def has_room(node: NodeView) -> bool:
    return node.available and node.inflight < node.max_inflight and node.waiting < node.max_waiting


N = TypeVar("N", bound=NodeView)


def pick_node(candidates: Sequence[N], *, exclude: frozenset[str] | set[str] = frozenset(),
              rng: Callable[[int], int] | None = None) -> N | None:
    """Least-loaded of two random nodes with room; None when every node is full, down or excluded."""
    ok = [n for n in candidates if n.key not in exclude and has_room(n)]
    if not ok:
        return None
    if len(ok) == 1:
        return ok[0]
    choose = rng or random.randrange
    a = ok[choose(len(ok))]
    b = ok[choose(len(ok) - 1)]
    if b is a:  # second draw from the others, so the two samples differ
        b = ok[-1]
    return a if load(a) <= load(b) else b


# Why a pinned session's turn did not go to the node that served its last turn (node affinity).
GONE, FAILED, UNHEALTHY, BUSY = "gone", "failed", "unhealthy", "busy"


def utilization(node: NodeView) -> float:
    """How full a node is, 0..1: the larger of its batch slots taken (router in-flight over the node's limit)
    and its KV cache in use (scraped)."""
    return max(node.inflight / node.max_inflight if node.max_inflight else 1.0, node.kv_usage)


def sticky_node(candidates: Sequence[N], last: str | None, *, max_load: float,
                exclude: frozenset[str] | set[str] = frozenset()) -> tuple[N | None, str | None]:
    """Node affinity: (the session's last node, None) while it is a candidate, healthy, has room and is below
    `max_load` utilization (its KV cache holds the session's prefix, so its prefill is short there); otherwise
    (None, why): `gone` (no longer a candidate), `failed` (it failed this request: a retry excludes it),
    `unhealthy` (ejected or draining) or `busy`. Load balance wins over cache reuse past the threshold: a busy
    node's queue costs more than a prefill."""
    node = next((n for n in candidates if n.key == last), None)
    if node is None:
        return None, GONE
    if node.key in exclude:
        return None, FAILED
    if not node.available:
        return None, UNHEALTHY
    if not has_room(node) or utilization(node) >= max_load:
        return None, BUSY
    return node, None
