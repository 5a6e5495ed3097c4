"""The headers every answer the router forwards carries, saying where it was served and why."""

from __future__ import annotations

from quantroute.router.nodes.pool import Node
from quantroute.router.path.route import Route


def route_headers(route: Route, node: Node) -> list[tuple[bytes, bytes]]:
    """The x-quantroute-* headers of an answer: where it was served and why (tier, deployment, node, policy
    version, rules; the canary arm, a pin, a reason for not the cheapest tier when there is one)."""
    h = [(b"x-quantroute-tier", node.tier.value.encode()),
         (b"x-quantroute-deployment", node.deployment.encode()),
         (b"x-quantroute-node", node.key.encode()),
         (b"x-quantroute-policy-version", route.policy.version_bytes),
         (b"x-quantroute-rules", route.rules_header)]
    if route.arm is not None:
        h.append((b"x-quantroute-arm", route.arm.encode()))
    if route.from_pin:  # the rules header names this request's rules; the pin, not they, chose the tier
        h.append((b"x-quantroute-pinned", b"true"))
    if route.reason is not None:  # not the cheapest allowed tier: spilled up or escalated, and why
        h.append((b"x-quantroute-reason", route.reason.encode()))
    return h
