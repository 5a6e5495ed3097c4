"""Everything that is not a completion: health, model list, metrics and the admin API (bearer token).

Off the hot path, so pydantic validates admin payloads here (NodeRegistration is the one shape)."""

from __future__ import annotations

import asyncio
import hmac
from typing import TYPE_CHECKING
from urllib.parse import unquote

import orjson
from pydantic import ValidationError

from quantroute.db.audit import record
from quantroute.db.engine import session as db_session
from quantroute.db.node import NodeRow, upsert_node
from quantroute.registration import NodeRegistration
from quantroute.router.errors import BadRequest, MethodNotAllowed, RouterError, Unauthorized

if TYPE_CHECKING:
    from quantroute.router.app import Router


class NotFoundPath(RouterError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


async def dispatch(router: "Router", scope, receive, send) -> None:
    from quantroute.router.app import send_json

    path, method = scope["path"], scope["method"]
    if path == "/health":
        cur = router.holder.current
        healthy = sum(1 for n in router.fleet.nodes.values() if n.healthy)
        return await send_json(send, 200, {"status": "ok", "policy_version": cur.version if cur else None,
                                           "nodes": len(router.fleet.nodes), "healthy_nodes": healthy})
    if path == "/v1/models":
        return await send_json(send, 200, models_payload(router))
    if path == "/metrics":
        body = router.metrics.render(router.fleet, router.writer)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8")]})
        return await send({"type": "http.response.body", "body": body})
    if not path.startswith("/admin/"):
        raise NotFoundPath(f"no route {method} {path}")
    check_token(router, scope)
    if path == "/admin/policy" and method == "GET":
        return await send_json(send, 200, router.holder.view())
    if path == "/admin/nodes":
        if method == "GET":
            return await send_json(send, 200, {"nodes": [n.view() for n in router.fleet.nodes.values()]})
        if method == "POST":
            reg = parse_registration(await router.read_body(scope, receive))
            node = await register_node(router, reg, actor="admin-api")
            return await send_json(send, 201, node.view())
        raise MethodNotAllowed("/admin/nodes takes GET or POST")
    if path == "/admin/sessions" and method == "GET":
        return await send_json(send, 200, {"sessions": await router.pins.list()})
    if path.startswith("/admin/sessions/") and method == "DELETE":
        key = unquote(path[len("/admin/sessions/"):])
        found = await router.pins.delete(key)
        return await send_json(send, 200 if found else 404, {"session_key": key, "unpinned": found})
    raise NotFoundPath(f"no admin route {method} {path}")


def check_token(router: "Router", scope) -> None:
    token = router.settings.admin_token
    if not token:
        raise Unauthorized("the admin API is disabled: start the router with an admin token "
                           "(--admin-token or QUANTROUTE_ROUTER_ADMIN_TOKEN)")
    got = next((v for k, v in scope["headers"] if k == b"authorization"), b"").decode("latin-1")
    if not hmac.compare_digest(got.encode(), f"Bearer {token}".encode()):
        raise Unauthorized("admin endpoints need 'Authorization: Bearer <admin token>'")


def models_payload(router: "Router") -> dict:
    ap = router.holder.current
    data = []
    if ap is not None:
        for m in sorted(ap.models):
            data.append({"id": m, "object": "model", "owned_by": "quantroute", "kind": "model",
                         "tiers": sorted(t.value for t in ap.served.get(m, ()))})
        for d in sorted(ap.deployment_model):
            data.append({"id": d, "object": "model", "owned_by": "quantroute", "kind": "deployment",
                         "root": ap.deployment_model[d], "tier": ap.deployment_tier[d].value})
    return {"object": "list", "data": data}


def parse_registration(body: bytes) -> NodeRegistration:
    try:
        return NodeRegistration.model_validate(orjson.loads(body))
    except orjson.JSONDecodeError as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    except ValidationError as e:
        first = e.errors(include_url=False)
        issues = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in first)
        param = ".".join(map(str, first[0]["loc"])) if first else None
        raise BadRequest(f"invalid node registration: {issues}", param=param) from None


async def register_node(router: "Router", reg: NodeRegistration, *, actor: str):
    """Add or update a node. The active policy decides each deployment's tier; a node claiming another tier
    for a known deployment is refused (it would serve a format the policy did not choose)."""
    ap = router.holder.current
    if ap is not None:
        want = ap.deployment_tier.get(reg.deployment)
        if want is not None and want != reg.tier:
            raise BadRequest(f"tier: deployment {reg.deployment!r} is tier {want.value} in policy version "
                             f"{ap.version}, the node registered {reg.tier.value}", param="tier")
    node = router.fleet.register(reg, speed=speed_for(reg.hardware, reg.tier.value))
    if router.engine is not None:
        await asyncio.to_thread(_persist, router.engine, node, actor)
    return node


def _persist(engine, node, actor: str) -> None:
    with db_session(engine) as s:
        record(s, actor=actor, action="node.register", subject=node.key,
               detail={"deployment": node.deployment, "tier": node.tier.value, "format": node.format,
                       "checksum": node.checksum, "generation": node.generation})
        upsert_node(session=s, row=NodeRow(key=node.key, url=node.url, model=node.model, deployment=node.deployment,
                                           tier=node.tier.value, format=node.format, method=node.method,
                                           checksum=node.checksum, hardware=node.hardware, vram_gb=node.vram_gb,
                                           generation=node.generation, generation_started=node.generation_started))


def speed_for(hardware: str, tier: str) -> float | None:
    """Relative decode speed of a node: memory bandwidth vs an A100-80G times the format's measured speed-up."""
    from quantroute.catalog import CatalogError, load_hardware

    try:
        spec = load_hardware().get(hardware)
    except (CatalogError, OSError):
        return None
    if spec is None:
        return None
    return spec.bandwidth_gbs / 2039.0 * spec.decode_speedup.get(tier, 1.0)
