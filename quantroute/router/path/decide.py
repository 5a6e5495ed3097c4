"""The routing decision for one request (ARCHITECTURE.md "Routing decision", steps 2-6): score, tier, session pin,
canary arm, node; waiting for capacity and escalating when the chosen tier has none.

I/O here is limited to the pin store (cache first) and waiting on the fleet's capacity signal; the choices
themselves are the pure functions in `select.py` and `canary.py`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from quantroute.classify import Decision
from quantroute.router.access.keys import Grant
from quantroute.router.errors import BadRequest, Forbidden, NoCapacity, NotFound, SessionPinUnavailable
from quantroute.router.nodes.pool import Node, NodePool
from quantroute.router.path.active_policy import ActivePolicy
from quantroute.router.path.canary import BASELINE, CANDIDATE, choose_arm
from quantroute.router.path.route import PinMoved, PinState, Placement, Route, Target
from quantroute.router.path.select import pick_node, sticky_node
from quantroute.router.path.spill import below_knee, choose
from quantroute.router.pins.store import Pin, PinStore
from quantroute.tiers import Tier

DEPLOYMENT_HEADER = "x-quantroute-deployment"  # request header: serve exactly this deployment


KEPT = "kept"


class Decider:
    def __init__(self, fleet: NodePool, pins: PinStore, *, retry_after_s: int = 1, metrics=None,
                 on_miss: Callable[[], None] | None = None, affinity_max_load: float | None = None) -> None:
        self.fleet = fleet
        self.pins = pins
        # Node affinity (None = off): a pinned session's turn goes to the node of its last turn while that node
        # is healthy, has room and is below this utilization (select.sticky_node).
        self.affinity_max_load = affinity_max_load
        self.retry_after_s = retry_after_s
        self.metrics = metrics
        self.on_miss = on_miss  # no node found: maybe another replica registered one (NodeSync.kick)
        self._cand_cache: dict[tuple, list[Node]] = {}
        self._cand_key: tuple = ()

    # -- candidates ----------------------------------------------------------------------------------------
    def candidates(self, ap: ActivePolicy, deployments: tuple[str, ...], tier: Tier) -> list[Node]:
        """Nodes serving one of `deployments` at `tier`, cached per (policy version, fleet epoch)."""
        key = (ap.version, id(ap), self.fleet.epoch)
        if key != self._cand_key:
            self._cand_cache = {}
            self._cand_key = key
        ck = (deployments, tier)
        nodes = self._cand_cache.get(ck)
        if nodes is None:
            nodes = [n for d in deployments for n in self.fleet.by_deployment.get(d, ()) if n.tier == tier]
            self._cand_cache[ck] = nodes
        return nodes

    # -- the decision ----------------------------------------------------------------------------------------
    async def decide(self, ap: ActivePolicy, body: dict, headers: Mapping[str, str], kind: str,
                     grant: Grant | None = None) -> Route:
        """`grant`: the client key's, when it sent one: its tenant's floor holds whatever the request says."""
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        requested = body.get("model")
        sessions = ap.policy.sessions
        if not isinstance(requested, str) or not requested:
            raise BadRequest("'model' is required and must be a non-empty string", param="model")
        if requested in ap.models:
            model, fixed_deployment = requested, None
        elif requested in ap.deployment_model:
            model, fixed_deployment = ap.deployment_model[requested], requested
        else:
            raise NotFound(f"model {requested!r} is not served; valid models: "
                           f"{', '.join(sorted(ap.models))} (or one of their deployment ids)", param="model")
        wanted = headers.get(DEPLOYMENT_HEADER)
        if wanted:  # an eval or a debugging client pins one artifact while asking for the logical model
            valid = sorted(d for d, m in ap.deployment_model.items() if m == model)
            if wanted not in valid:
                raise BadRequest(f"header {DEPLOYMENT_HEADER}: {wanted!r} is not a deployment of model {model!r}; "
                                 f"valid: {', '.join(valid)}", param=DEPLOYMENT_HEADER)
            if fixed_deployment is not None and fixed_deployment != wanted:
                raise BadRequest(f"header {DEPLOYMENT_HEADER} ({wanted!r}) contradicts model {requested!r}",
                                 param=DEPLOYMENT_HEADER)
            fixed_deployment = wanted
        decision = ap.compiled.classify(body, headers, kind)  # raises RequestError -> 400
        session_key = headers.get(sessions.header) if sessions.affinity else None
        if grant is not None:
            decision, session_key = self._floored(ap, grant, decision, fixed_deployment, session_key)
        pin = self.pins.get(session_key, sessions.ttl_s) if session_key else None
        if pin is not None and pin.model != model:
            pin = None  # a session key reused for another model starts its own pin (not shared)
        if pin is not None and session_key:  # (a pin is only ever found by its session key)
            return await self._pinned(ap, pin, model, decision, session_key)
        return await self._unpinned(ap, model, fixed_deployment, decision, session_key, headers)

    @staticmethod
    def _floored(ap: ActivePolicy, grant: Grant, decision: Decision, fixed: str | None,
                 session_key: str | None) -> tuple[Decision, str | None]:
        """The decision raised to the tenant's floor, and the session key in the tenant's own namespace."""
        floor = grant.floor
        if floor is not None:
            if fixed is not None and ap.deployment_tier[fixed].rank > floor.rank:
                raise Forbidden(f"deployment {fixed!r} serves {ap.deployment_tier[fixed].value}, below this key's "
                                f"tier floor {floor.value}; name the model or a deployment at {floor.value} or above",
                                param="model")
            if decision.tier.rank > floor.rank:
                decision = replace(decision, tier=floor)
        return decision, (grant.session_prefix + session_key if session_key else None)

    async def _pinned(self, ap: ActivePolicy, pin: Pin, model: str, decision: Decision, key: str) -> Route:
        tier = Tier(pin.tier)
        if pin.arm == CANDIDATE and not pin.deployment:
            canary = ap.policy.canary_for(model)
            if canary is None or canary.percent <= 0:
                # The canary was rolled back (or removed): its sessions return to the baseline at the same
                # tier, once, and stay there even if a later canary starts again.
                self.pins.rearm(key, BASELINE)
                pin.arm, pin.served_deployment = BASELINE, None
        arm, fixed = pin.arm, pin.deployment or None  # as the pin is now (it may be adopted while we wait)
        deps = (fixed,) if fixed else ap.deployments(model, tier, arm)
        target = Target(ap, tier, deps, session_key=key, pin_created=pin.created_at,
                        last_node=pin.node if self.affinity_max_load is not None else None)
        if not pin.deployment:
            target.prefer = pin.served_deployment
            if target.prefer is not None and target.prefer not in deps:  # the policy no longer has it here
                self._fall_back(target, None, "not_in_policy")
        placement = Placement.FIRST
        node = self.pick(target, set())
        if node is None:  # pinned: same tier always; wait for room, then 503
            node, placement = await self._wait(target, ap.policy.sessions.max_wait_ms / 1000), Placement.WAITED
        if node is None:
            self._count_503(tier, True)
            raise NoCapacity(f"no capacity at tier {tier.value} for session {key!r} (pinned); retry later",
                             headers={"Retry-After": str(self.retry_after_s)})
        if not pin.deployment and target.prefer is None:  # a pin from before served_deployment: adopt this one
            target.prefer = node.deployment
            self.pins.set_served(key, node.deployment)
        return Route(target, node, model, decision, arm, fixed, placement, PinState.FOLLOWED, pin)

    async def _unpinned(self, ap: ActivePolicy, model: str, fixed: str | None, decision: Decision,
                        key: str | None, headers: Mapping[str, str]) -> Route:
        policy = ap.policy
        if fixed is not None:
            tier = ap.deployment_tier[fixed]
            ladder: tuple[Tier, ...] = (tier,)
            arm = None
        else:
            ladder = ap.ladder(model, decision.tier)  # memoized per policy version
            if not ladder:
                self._count_503(decision.tier, False)
                raise NoCapacity(f"model {model!r} has no deployment at tier {decision.tier.value} or above",
                                 headers={"Retry-After": str(self.retry_after_s)})
            tier = ladder[0]
            canary = policy.canary_for(model)
            arm = None
            if canary is not None and canary.percent > 0:  # a canary at 0 % is not running: no arms
                arm = choose_arm(key or headers.get("x-request-id") or uuid.uuid4().hex, canary.percent, model)
        target = Target(ap, tier, (), session_key=key)
        found = self._climb(target, ladder, model, fixed, arm)
        if found is None:
            target.tier = tier
            target.deployments = (fixed,) if fixed else ap.deployments(model, tier, arm)
            node = await self._wait(target, policy.sessions.max_wait_ms / 1000,
                                    pick=lambda: self._climb(target, ladder, model, fixed, arm))
            if node is None:
                self._count_503(tier, False)
                raise NoCapacity(f"no capacity at tier {tier.value} or any tier the policy allows above it",
                                 headers={"Retry-After": str(self.retry_after_s)})
            found = node, Placement.WAITED, None
        node, placement, reason = found
        if placement is not Placement.FIRST and target.tier != tier and self.metrics:
            self.metrics.escalations.labels(tier.value, target.tier.value).inc()
        route = Route(target, node, model, decision, arm, fixed, placement, reason=reason)
        if key is not None:
            self._claim_pin(route, key)
        return route

    def _climb(self, target: Target, ladder: tuple[Tier, ...], model: str, fixed: str | None,
               arm: str | None) -> tuple[Node, Placement, str | None] | None:
        """A node up the ladder (cheapest first; never below the decision's tier): the cheapest tier's while it
        has headroom, else as path.spill.choose says (spilled up from its knee, or escalated when it is full)."""
        ap = target.policy
        tier = ladder[0]
        deps = (fixed,) if fixed else ap.deployments(model, tier, arm)
        target.tier, target.deployments = tier, deps
        node = pick_node(self.candidates(ap, deps, tier))
        if node is not None and (len(ladder) == 1 or below_knee(node, ap.spill_target)):
            return node, Placement.FIRST, None  # the common case: the cheapest tier has headroom
        if len(ladder) == 1:
            if self.on_miss is not None:
                self.on_miss()
            return None
        per_tier = [deps, *((fixed,) if fixed else ap.deployments(model, t, arm) for t in ladder[1:])]
        node, i, reason, full = choose(ladder, [self.candidates(ap, d, t) for d, t in zip(per_tier, ladder)],
                                       ap.spill_target)
        if full and self.on_miss is not None:
            self.on_miss()  # maybe another replica registered a node of the cheapest tier
        if node is None:
            return None
        target.tier, target.deployments = ladder[i], per_tier[i]
        if i == 0:
            return node, Placement.FIRST, None
        return node, Placement.ESCALATED if full else Placement.SPILLED, reason

    def _claim_pin(self, route: Route, key: str) -> None:
        """Pin the session to this route; the pin is stored while the request is forwarded (`settle`)."""
        target = route.target
        served = None if route.fixed else route.node.deployment
        node = route.node.key if self.affinity_max_load is not None else None
        route.pin = self.pins.claim(key=key, model=route.model, tier=target.tier.value,
                                    arm=route.arm, deployment=route.fixed, policy_version=target.policy.version,
                                    ttl_s=target.policy.policy.sessions.ttl_s, served_deployment=served, node=node)
        target.prefer = served  # a retry of this first request stays on the deployment the pin names
        target.pin_created = route.pin.created_at
        route.pin_state = PinState.CLAIMED

    # -- the ordering guarantee ------------------------------------------------------------------------------
    def pending(self, route: Route) -> asyncio.Future | None:
        """The commit this request's answer must wait for, if its pin is still being stored."""
        pin = route.pin
        return pin.stored if pin is not None and pin.stored is not None else None

    async def settle(self, route: Route, timeout_s: float) -> None:
        """Called before the first byte of a response leaves: wait until the session's pin is stored, then
        check the request went where the stored pin says. So a client can never read an answer whose pin is
        not durable (its next turn finds the pin on every replica), and never one routed against the pin."""
        fut = self.pending(route)
        if fut is not None and not fut.done():
            # Wait without cancelling the claim (other turns may share it): a waiter released by the claim or by
            # a timer (cheaper than wait_for(shield(...)) on every first turn).
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()

            def release(_=None) -> None:
                if not waiter.done():
                    waiter.set_result(None)

            fut.add_done_callback(release)
            timer = loop.call_later(timeout_s, release)
            waited = time.perf_counter()
            try:
                await waiter
            finally:
                timer.cancel()
                fut.remove_done_callback(release)
                if self.metrics:
                    self.metrics.pins.wait.observe(time.perf_counter() - waited)
            if not fut.done():
                raise SessionPinUnavailable(f"the pin of session {route.session_key!r} was not stored within "
                                            f"{timeout_s:g}s; retry later",
                                            headers={"Retry-After": str(self.retry_after_s)})
        self.check_settled(route, fut)

    def check_settled(self, route: Route, fut: asyncio.Future | None) -> None:
        """Raise if the settled pin fails the request (not stored) or moves it (another replica won)."""
        if fut is not None:
            pin = route.pin
            if fut.cancelled() or fut.exception() is not None:
                if pin is not None:
                    self.pins.adopt(pin)  # forgotten: the session's next turn claims again
                why = "cancelled" if fut.cancelled() else str(fut.exception())
                raise SessionPinUnavailable(f"the pin of session {route.session_key!r} could not be stored "
                                            f"({why}); retry later", headers={"Retry-After": str(self.retry_after_s)})
            if pin is not None and self.stored_as_claimed(pin, fut):
                self.pins.adopt(pin)  # this request's own route, stored: nothing to compare or follow
                return
        if not self.agrees(route):
            raise PinMoved()
        if route.claimed and self.affinity_moves(route):
            raise PinMoved(affinity=True)
        if route.pin_state is PinState.CLAIMED and route.pin is not None \
                and route.pin.created_at != route.target.pin_created:
            route.pin_state = PinState.FOUND  # the claim found the session pinned already (same route by chance)

    @staticmethod
    def stored_as_claimed(pin: Pin, fut: asyncio.Future) -> bool:
        """Whether the claim stored exactly the row `pin` claimed (the committer hands that very dict back): the
        request then goes where its pin says, by construction. False while it is pending or if it failed."""
        return (pin.claim_row is not None and fut.done() and not fut.cancelled() and fut.exception() is None
                and fut.result() is pin.claim_row)

    def agrees(self, route: Route) -> bool:
        """Whether the request goes where its session's pin (as stored, once it is) says."""
        pin = route.pin
        if pin is None:
            return True
        self.pins.adopt(pin)
        if pin.model != route.model:
            return True
        dep = route.node.deployment
        # Tier is a str enum: it equals its value, without the enum's `.value` descriptor (twice a first turn)
        return (pin.tier == route.tier and pin.arm == route.arm
                and (pin.deployment is None or pin.deployment == dep)
                and (pin.served_deployment is None or pin.served_deployment == dep))

    def affinity_moves(self, route: Route) -> bool:
        """With node affinity: whether a first turn routed here found the session already pinned (by another
        replica or worker) with a last node that can take this turn, so it should go there for the KV cache."""
        pin = route.pin
        if self.affinity_max_load is None or pin is None or pin.node is None:
            return False
        if pin.node == route.node.key or pin.model != route.model:
            return False
        target = route.target
        node, _ = sticky_node(self.candidates(target.policy, target.deployments, target.tier), pin.node,
                              max_load=self.affinity_max_load)
        return node is not None

    def moved(self, route: Route) -> bool:
        """The stored pin sends this request elsewhere (see `agrees` and `affinity_moves`); never when it stored
        this request's own claim."""
        pin = route.pin
        if pin is not None and pin.stored is not None and self.stored_as_claimed(pin, pin.stored):
            return False
        return not self.agrees(route) or self.affinity_moves(route)

    def served(self, route: Route, node: Node | None) -> None:
        """After a pinned session's turn was answered: remember its node for the next turn (node affinity)."""
        if self.affinity_max_load is not None and node is not None and route.session_key is not None \
                and route.pin is not None and route.pin.stored is None:
            self.pins.set_node(route.session_key, node.key)

    async def follow(self, route: Route) -> Route:
        """Re-route a request whose session was pinned elsewhere first: exactly as a later turn would go."""
        if route.pin is None or route.session_key is None:
            raise ValueError("only a pinned route (pin, session key) is followed")
        return await self._pinned(route.policy, route.pin, route.model, route.decision, route.session_key)

    # -- nodes --------------------------------------------------------------------------------------------
    def pick(self, target: Target, exclude: set[str]) -> Node | None:
        nodes = self.candidates(target.policy, target.deployments, target.tier)
        if target.pin_created is not None:
            q = target.policy.policy.sessions.quiescence_s
            nodes = [n for n in nodes if not n.quiescent_for(target.pin_created, q)]
        if target.last_node is not None:
            pool = nodes if target.prefer is None else [n for n in nodes if n.deployment == target.prefer]
            sticky, why = sticky_node(pool, target.last_node, max_load=self.affinity_max_load or 0.0,
                                      exclude=exclude)
            target.affinity = KEPT if sticky is not None else f"fallback_{why}"
            if sticky is not None:
                return sticky
        if target.prefer is None:
            return pick_node(nodes, exclude=exclude)
        preferred = [n for n in nodes if n.deployment == target.prefer]
        node = pick_node(preferred, exclude=exclude)
        if node is not None or any(n.available and n.key not in exclude for n in preferred):
            return node  # the session's deployment is alive: stay on it, even if that means waiting for room
        node = pick_node(nodes, exclude=exclude)
        if node is not None:  # it is gone: another deployment of the same tier (and arm), counted
            self._fall_back(target, node, "no_healthy_node")
        return node

    def _fall_back(self, target: Target, node: Node | None, reason: str) -> None:
        """Move a pinned session off its deployment (`node` None: to whichever node is picked next)."""
        if self.metrics:
            self.metrics.pin_fallbacks.labels(target.tier.value, reason).inc()
        target.prefer = node.deployment if node is not None else None
        if node is not None and target.session_key is not None:
            self.pins.set_served(target.session_key, node.deployment)

    async def _wait(self, target: Target, max_wait: float,
                    pick: Callable[[], tuple[Node, Placement, str | None] | None] | None = None) -> Node | None:
        """Wait for a node of `target` (or, unpinned, for whatever `pick` finds up the ladder)."""
        if self.on_miss is not None:
            self.on_miss()
        if max_wait <= 0:
            return None
        if self.metrics:
            self.metrics.session_waits.labels(target.tier.value).inc()
        deadline = time.monotonic() + max_wait
        while (left := deadline - time.monotonic()) > 0:
            await self.fleet.wait_for_capacity(min(left, 0.25))
            if pick is not None:
                found = pick()
                if found is not None:
                    return found[0]
                continue
            node = self.pick(target, set())
            if node is not None:
                return node
        return None

    def _count_503(self, tier: Tier, pinned: bool) -> None:
        if self.metrics:
            self.metrics.no_capacity.labels(tier.value, "true" if pinned else "false").inc()
