"""Register a node with a router: the registrar reads the artifact (tier, format, method, checksum), the
router's admin API (`POST /admin/nodes`, bearer token) takes the registration."""

from __future__ import annotations

from pathlib import Path

import httpx

from quantroute.node import NodeIdentity
from quantroute.registrar import build_registration, inspect_model_dir


class RegistrationError(RuntimeError):
    """The router refused or could not be reached; the message says which and why."""


def post_registration(reg: NodeIdentity, *, router_url: str, token: str, timeout: float = 10.0) -> int:
    """Send `reg` to the router; returns the HTTP status (200 or 201)."""
    url = router_url.rstrip("/") + "/admin/nodes"
    try:
        resp = httpx.post(url, json=reg.model_dump(mode="json", exclude_none=True),
                          headers={"authorization": f"Bearer {token}"}, timeout=timeout)
    except httpx.HTTPError as e:
        raise RegistrationError(f"--router: cannot reach {url}: {e}") from None
    if resp.status_code >= 300:
        try:
            message = resp.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = resp.text[:500]
        raise RegistrationError(f"{url} answered {resp.status_code}: {message}")
    return resp.status_code


def register_artifact(*, model_dir: Path, node_url: str, deployment: str, model: str, hardware: str,
                      router_url: str, token: str) -> NodeIdentity:
    """Inspect `model_dir` and register the node serving it; the tier is the artifact's, never a name's."""
    reg = build_registration(inspect_model_dir(model_dir), node_url=node_url, deployment=deployment, model=model,
                             hardware=hardware)
    post_registration(reg, router_url=router_url, token=token)
    return reg
