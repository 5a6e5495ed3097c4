"""Where one request goes and why: the nodes that may serve it (Target), the route picked (Route), what its
session pin did and how its node was found; PinMoved when another replica pinned the session first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from quantroute.classify import Decision
from quantroute.router.nodes.pool import Node
from quantroute.router.path.active_policy import ActivePolicy
from quantroute.router.pins.store import Pin
from quantroute.tiers import Tier


class PinState(Enum):
    """What the session's pin did for a route."""

    NONE = "none"  # no session key (or sessions off): nothing pinned
    FOLLOWED = "followed"  # an existing pin chose the tier, arm and deployment, not this request's score
    CLAIMED = "claimed"  # a first turn: the route is claimed as the session's pin (stored while it is forwarded)
    FOUND = "found"  # claimed, but the claim found the session pinned already, to this same route


class Placement(Enum):
    """How the route's node was found."""

    FIRST = "first"  # a node with room at the first tier tried
    ESCALATED = "escalated"  # no room at the decision's tier: a node at a tier above it
    SPILLED = "spilled"  # the decision's tier at its knee: a node with headroom at a tier above it (path.spill)
    WAITED = "waited"  # no room at once: waited for the fleet's capacity


@dataclass(slots=True)
class Target:
    """Which nodes may serve a request: one tier's deployments, narrowed by its session's pin. `Decider.pick`
    reads it for the first node and for every retry, and records what it did (`prefer`, `affinity`)."""

    policy: ActivePolicy
    tier: Tier
    deployments: tuple[str, ...]
    session_key: str | None = None
    pin_created: datetime | None = None  # nodes quiescent since the pin was made are left out
    last_node: str | None = None  # node affinity: the node that served the session's last turn
    prefer: str | None = None  # a pinned session's deployment: used while it has a healthy node
    affinity: str | None = None  # what node affinity did: "kept", or "fallback_<why>" (select.sticky_node)


@dataclass(slots=True)
class Route:
    """Where one request goes and why, made once its node is picked; read by the proxy, the response headers and
    the request log."""

    target: Target
    node: Node  # the first node picked (a retry may go elsewhere: ForwardResult.node)
    model: str
    decision: Decision
    arm: str | None
    # the deployment the client named (its id as `model`, x-quantroute-deployment, or a session pinned that way):
    # logged as arm "direct", never counted by canary guards, which count only the router's hash assignment
    fixed: str | None
    placement: Placement
    pin_state: PinState = PinState.NONE
    pin: Pin | None = None  # the session's pin (possibly still being stored: see Decider.settle)
    reason: str | None = None  # why not the cheapest allowed tier: "spilled up: int4 at its knee", "escalated: ..."

    @property
    def policy(self) -> ActivePolicy:
        return self.target.policy

    @property
    def tier(self) -> Tier:
        return self.target.tier

    @property
    def session_key(self) -> str | None:
        return self.target.session_key

    @property
    def affinity(self) -> str | None:
        return self.target.affinity

    @property
    def direct(self) -> bool:
        return self.fixed is not None

    @property
    def escalated(self) -> bool:
        """Served above the cheapest tier its policy allows (no room there, or spilled up from its knee)."""
        return self.placement is Placement.ESCALATED or self.placement is Placement.SPILLED

    @property
    def waited(self) -> bool:
        return self.placement is Placement.WAITED

    @property
    def from_pin(self) -> bool:
        """The tier came from an existing session pin, not from this request's score."""
        return self.pin_state is PinState.FOLLOWED or self.pin_state is PinState.FOUND

    @property
    def claimed(self) -> bool:
        """Routed as a first turn: its pin claim may return another replica's pin."""
        return self.pin_state is PinState.CLAIMED or self.pin_state is PinState.FOUND

    @property
    def rules_header(self) -> bytes:
        return ",".join(self.decision.rule_names).encode()


class PinMoved(Exception):
    """This request routed a first turn, but another replica or worker stored the session's pin first with
    another tier, arm or deployment (or, with node affinity, another node that can take it): the request must
    follow that pin (`Decider.follow`) before answering."""

    def __init__(self, *, affinity: bool = False) -> None:
        super().__init__()
        self.affinity = affinity  # only the node differs: a re-route for the KV cache, not a pin conflict
