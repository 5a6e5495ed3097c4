"""Everything that is not a completion: health, model list, metrics and the admin API (bearer token).

Off the hot path, so pydantic validates admin payloads here (NodeIdentity is the one shape). `AdminApi` gets the
parts of the router it reads and changes, not the router itself."""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

import orjson
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from quantroute.catalog import speed_for
from quantroute.db.audit import record
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.node import NodeIdentity, merge_node_views
from quantroute.router.admin.peers import WorkerPeers
from quantroute.router.errors import BadRequest, MethodNotAllowed, RouterError, Unauthorized, WorkersUnreachable
from quantroute.router.metrics.registry import merge_worker_metrics
from quantroute.router.nodes.pool import Node, NodePool
from quantroute.router.path.active_policy import PolicyHolder
from quantroute.router.pins.store import PinStore
from quantroute.router.responses import send_bytes, send_json

log = logging.getLogger(__name__)

METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class NotFoundPath(RouterError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class AdminApi:
    def __init__(self, *, token: str | None, holder: PolicyHolder, pool: NodePool, pins: PinStore,
                 engine: Engine | None, render_metrics: Callable[[], bytes],
                 read_body: Callable[..., Awaitable[bytes]], peers: WorkerPeers | None = None) -> None:
        self.token = token
        self.holder = holder
        self.pool = pool
        self.pins = pins
        self.engine = engine
        self.render_metrics = render_metrics
        self.read_body = read_body
        # the other workers behind this port (`--workers N`): what one worker answers covers them all
        self.peers = peers

    # -- what the other workers answer (see peers.py) -----------------------------------------------------------
    def peer_handlers(self, refresh_nodes: Callable[[], Awaitable[object]]) -> dict:
        async def metrics(_: dict) -> bytes:
            return self.render_metrics()

        async def nodes(_: dict) -> bytes:
            return orjson.dumps([n.view() for n in self.pool.nodes.values()])

        async def unpin(ask: dict) -> bytes:  # the asking worker deleted the row; only our cache is left
            return b"1" if self.pins.forget(ask["key"]) else b"0"

        async def node_changed(_: dict) -> bytes:
            await refresh_nodes()
            return b""

        return {"metrics": metrics, "nodes": nodes, "unpin": unpin, "node-changed": node_changed}

    async def metrics_body(self) -> bytes:
        own = self.render_metrics()
        if self.peers is None:
            return own
        replies = await self.peers.ask("metrics")
        answered = [(r.worker, r.body) for r in replies if r.body is not None]
        return merge_worker_metrics([(self.peers.worker or "?", own), *answered],
                                    [r.worker for r in replies if r.body is None])

    async def node_views(self) -> list[dict]:
        own = [n.view() for n in self.pool.nodes.values()]
        if self.peers is None:
            return own
        replies = await self.peers.ask("nodes")
        if failed := [r for r in replies if r.body is None]:
            raise WorkersUnreachable("the node list needs every worker's in-flight counts; " + _who(failed))
        return merge_node_views([own, *(orjson.loads(r.body) for r in replies if r.body is not None)])

    async def unpin(self, key: str) -> bool:
        found = await self.pins.delete(key)
        if self.peers is None:
            return found
        replies = await self.peers.ask("unpin", key=key)
        if failed := [r for r in replies if r.body is None]:
            raise WorkersUnreachable(f"session {key!r} was unpinned in the database and in the caches of workers "
                                     f"{', '.join([self.peers.worker or '?', *(r.worker for r in replies if r.body)])}"
                                     f"; {_who(failed)}: a cached pin there lives until it expires, so retry the "
                                     "unpin")
        return found or any(r.body == b"1" for r in replies)

    async def nodes_changed(self) -> None:
        """Tell the other workers a node row changed, so they stop sending to a drained or removed node now
        rather than at their next refresh. Best effort: the refresh catches up anyway."""
        if self.peers is None:
            return
        for r in await self.peers.ask("node-changed"):
            if r.body is None:
                log.warning("worker %s did not pick up a node change (%s); its next node refresh will", r.worker,
                            r.error)

    async def dispatch(self, scope, receive, send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/health":
            cur = self.holder.current
            healthy = sum(1 for n in self.pool.nodes.values() if n.healthy)
            return await send_json(send, 200, {"status": "ok", "policy_version": cur.version if cur else None,
                                               "nodes": len(self.pool.nodes), "healthy_nodes": healthy})
        if path == "/ready":
            problems = readiness_problems(self.holder, self.pool)
            return await send_json(send, 503 if problems else 200,
                                   {"status": "not ready" if problems else "ready", "problems": problems})
        if path == "/v1/models":
            return await send_json(send, 200, models_payload(self.holder))
        if path == "/metrics":
            return await send_bytes(send, 200, await self.metrics_body(), METRICS_TYPE)
        if not path.startswith("/admin/"):
            raise NotFoundPath(f"no route {method} {path}")
        check_token(self.token, scope)
        if path == "/admin/policy" and method == "GET":
            return await send_json(send, 200, self.holder.view())
        if path == "/admin/nodes":
            if method == "GET":
                return await send_json(send, 200, {"nodes": await self.node_views()})
            if method == "POST":
                reg = parse_registration(await self.read_body(scope, receive))
                node = await self.register_node(reg, actor=actor_of(scope))
                return await send_json(send, 201, node.view())
            raise MethodNotAllowed("/admin/nodes takes GET or POST")
        if path.startswith("/admin/nodes/"):
            return await self.node_action(scope, send, unquote(path[len("/admin/nodes/"):]), method)
        if path == "/admin/sessions" and method == "GET":
            return await send_json(send, 200, {"sessions": await self.pins.list()})
        if path.startswith("/admin/sessions/") and method == "DELETE":
            key = unquote(path[len("/admin/sessions/"):])
            found = await self.unpin(key)
            return await send_json(send, 200 if found else 404, {"session_key": key, "unpinned": found})
        raise NotFoundPath(f"no admin route {method} {path}")

    async def register_node(self, reg: NodeIdentity, *, actor: str) -> Node:
        """Add or update a node. The active policy decides each deployment's tier; a node claiming another tier
        for a known deployment is refused (it would serve a format the policy did not choose)."""
        ap = self.holder.current
        if ap is not None:
            want = ap.deployment_tier.get(reg.deployment)
            if want is not None and want != reg.tier:
                raise BadRequest(f"tier: deployment {reg.deployment!r} is tier {want.value} in policy version "
                                 f"{ap.version}, the node registered {reg.tier.value}", param="tier")
        node = self.pool.register(reg, speed=speed_for(reg.hardware, reg.tier.value))
        node.draining = False  # registering again is the operator's word that the node takes traffic
        await self._mark(node, "active", actor)
        return node

    async def node_action(self, scope, send, rest: str, method: str) -> None:
        """GET /admin/nodes/{id}; DELETE it (deregister); POST /admin/nodes/{id}/drain."""
        key, _, verb = rest.partition("/")
        node = self.pool.nodes.get(key)
        if node is None:
            raise NotFoundPath(f"no node {key!r}; GET /admin/nodes lists them")
        if verb == "" and method == "GET":
            return await send_json(send, 200, node.view())
        if verb == "" and method == "DELETE":
            self.pool.remove(key)
            await self._mark(node, "removed", actor_of(scope))
            return await send_json(send, 200, {**node.view(), "removed": True})
        if verb == "drain" and method == "POST":
            node.draining = True
            self.pool.epoch += 1  # cached candidate lists must drop it now
            await self._mark(node, "draining", actor_of(scope))
            return await send_json(send, 200, node.view())
        raise MethodNotAllowed(f"/admin/nodes/{key} takes GET or DELETE; /admin/nodes/{key}/drain takes POST")

    async def _mark(self, node: Node, state: str, actor: str) -> None:
        if self.engine is not None:
            await asyncio.to_thread(_persist, self.engine, node, actor, state)
            await self.nodes_changed()


def actor_of(scope) -> str:
    """Who the audit log names: the admin API, and the person behind the call when a client says so."""
    who = next((v for k, v in scope["headers"] if k == b"x-quantroute-actor"), b"").decode("latin-1")[:100]
    return f"admin-api:{who}" if who else "admin-api"


def _who(failed) -> str:
    return "; ".join(f"worker {r.worker} did not answer ({r.error})" for r in failed)


def readiness_problems(holder: PolicyHolder, pool: NodePool) -> list[str]:
    """Why this replica should not get traffic yet: no policy, or a served model with no healthy node."""
    ap = holder.current
    if ap is None:
        return ["no policy version loaded"]
    up = {n.deployment for n in pool.nodes.values() if n.available}
    problems = []
    for model in sorted(ap.models):
        deps = [d for d, m in ap.deployment_model.items() if m == model]
        if deps and not up.intersection(deps):
            problems.append(f"model {model}: no healthy node for any of its deployments ({', '.join(sorted(deps))})")
    return problems


def check_token(token: str | None, scope) -> None:
    if not token:
        raise Unauthorized("the admin API is disabled: start the router with an admin token "
                           "(--admin-token or QUANTROUTE_ROUTER_ADMIN_TOKEN)")
    got = next((v for k, v in scope["headers"] if k == b"authorization"), b"").decode("latin-1")
    if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
        raise Unauthorized("admin endpoints need 'Authorization: Bearer <admin token>'")


def models_payload(holder: PolicyHolder) -> dict:
    ap = holder.current
    data = []
    if ap is not None:
        for m in sorted(ap.models):
            data.append({"id": m, "object": "model", "owned_by": "quantroute", "kind": "model",
                         "tiers": sorted(t.value for t in ap.served.get(m, ()))})
        for d in sorted(ap.deployment_model):
            data.append({"id": d, "object": "model", "owned_by": "quantroute", "kind": "deployment",
                         "root": ap.deployment_model[d], "tier": ap.deployment_tier[d].value})
    return {"object": "list", "data": data}


def parse_registration(body: bytes) -> NodeIdentity:
    try:
        return NodeIdentity.model_validate(orjson.loads(body))
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    except ValidationError as e:
        first = e.errors(include_url=False)
        issues = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in first)
        param = ".".join(map(str, first[0]["loc"])) if first else None
        raise BadRequest(f"invalid node registration: {issues}", param=param) from None


ACTIONS = {"active": "node.register", "draining": "node.drain", "removed": "node.deregister"}


def _persist(engine: Engine, node: Node, actor: str, state: str) -> None:
    """The node's row with its state, and the audit event, in one transaction."""
    with db_session(engine) as s:
        record(s, actor=actor, action=ACTIONS[state], subject=node.key,
               detail={"deployment": node.deployment, "tier": node.tier.value, "format": node.format,
                       "checksum": node.checksum, "generation": node.generation, "inflight": node.inflight})
        upsert_node(session=s, row=NodeRow.from_identity(node.identity(), generation=node.generation,
                                                         generation_started=node.generation_started, state=state))
