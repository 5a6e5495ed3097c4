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

