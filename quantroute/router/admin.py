"""Everything that is not a completion: health, model list, metrics and the admin API (bearer token).

Off the hot path, so pydantic validates admin payloads here (NodeIdentity is the one shape). `AdminApi` gets the
parts of the router it reads and changes, not the router itself."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

import orjson
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from quantroute.catalog import speed_for
from quantroute.db.audit import record
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.node import NodeIdentity
from quantroute.router.errors import BadRequest, MethodNotAllowed, RouterError, Unauthorized
from quantroute.router.nodes import Node, NodePool
from quantroute.router.reload import PolicyHolder
from quantroute.router.responses import send_bytes, send_json
from quantroute.router.sessions import PinStore

METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


class NotFoundPath(RouterError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class AdminApi:
    def __init__(self, *, token: str | None, holder: PolicyHolder, pool: NodePool, pins: PinStore,
                 engine: Engine | None, render_metrics: Callable[[], bytes],
                 read_body: Callable[..., Awaitable[bytes]]) -> None:
        self.token = token
        self.holder = holder
        self.pool = pool
        self.pins = pins
        self.engine = engine
        self.render_metrics = render_metrics
        self.read_body = read_body

    async def dispatch(self, scope, receive, send) -> None:
        path, method = scope["path"], scope["method"]
        if path == "/health":
            cur = self.holder.current
            healthy = sum(1 for n in self.pool.nodes.values() if n.healthy)
            return await send_json(send, 200, {"status": "ok", "policy_version": cur.version if cur else None,
                                               "nodes": len(self.pool.nodes), "healthy_nodes": healthy})
        if path == "/v1/models":
            return await send_json(send, 200, models_payload(self.holder))
        if path == "/metrics":
            return await send_bytes(send, 200, self.render_metrics(), METRICS_TYPE)
        if not path.startswith("/admin/"):
            raise NotFoundPath(f"no route {method} {path}")
        check_token(self.token, scope)
        if path == "/admin/policy" and method == "GET":
            return await send_json(send, 200, self.holder.view())
        if path == "/admin/nodes":
            if method == "GET":
                return await send_json(send, 200, {"nodes": [n.view() for n in self.pool.nodes.values()]})
            if method == "POST":
                reg = parse_registration(await self.read_body(scope, receive))
                node = await self.register_node(reg, actor="admin-api")
                return await send_json(send, 201, node.view())
            raise MethodNotAllowed("/admin/nodes takes GET or POST")
        if path == "/admin/sessions" and method == "GET":
            return await send_json(send, 200, {"sessions": await self.pins.list()})
        if path.startswith("/admin/sessions/") and method == "DELETE":
            key = unquote(path[len("/admin/sessions/"):])
            found = await self.pins.delete(key)
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
        if self.engine is not None:
            await asyncio.to_thread(_persist, self.engine, node, actor)
        return node


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


def _persist(engine: Engine, node: Node, actor: str) -> None:
    with db_session(engine) as s:
        record(s, actor=actor, action="node.register", subject=node.key,
               detail={"deployment": node.deployment, "tier": node.tier.value, "format": node.format,
                       "checksum": node.checksum, "generation": node.generation})
        upsert_node(session=s, row=NodeRow.from_identity(node.identity(), generation=node.generation,
                                                         generation_started=node.generation_started))
