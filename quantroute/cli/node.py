"""`quantroute node inspect|register|drain|deregister`: read what a model directory really holds and register a
node serving it with a router; take a node out, at once or after its requests finished. The decision lives in
quantroute.registrar and the router's admin API; this module only does I/O."""

from __future__ import annotations

import json
from pathlib import Path

import click

TOKEN_ENV = ["QUANTROUTE_ADMIN_TOKEN", "QUANTROUTE_ROUTER_ADMIN_TOKEN"]


def _inspect(model_dir: Path):
    from quantroute.registrar import InspectionError, inspect_model_dir

    try:
        return inspect_model_dir(model_dir)
    except InspectionError as e:
        raise click.ClickException(str(e)) from None


@click.group("node")
def node() -> None:
    """Inspect model artifacts, register vLLM nodes with a router, drain and remove them."""


@node.command("inspect")
@click.argument("model_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the full inspection as JSON")
def inspect_cmd(model_dir: Path, as_json: bool) -> None:
    """Detect the format and tier of MODEL_DIR from config.json and the safetensors headers."""
    result = _inspect(model_dir)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    group = "per-channel" if result.group_size == -1 else result.group_size
    click.echo(f"{result.model_dir}\n"
               f"  tier       {result.tier.value}\n"
               f"  format     {result.format} ({result.scheme})\n"
               f"  method     {result.method}, {result.bits}-bit"
               + (f", group_size {group}" if result.group_size is not None else "") + "\n"
               f"  dtype      {result.torch_dtype} (config.json)\n"
               f"  dtypes     {', '.join(f'{d}: {n}' for d, n in result.dtype_histogram.items())}\n"
               f"  files      {', '.join(result.files)} ({result.total_bytes} bytes)\n"
               f"  checksum   {result.checksum}")
    for line in result.evidence:
        click.echo(f"  because    {line}")
    for line in result.warnings:
        click.echo(f"  warning    {line}")


@node.command("register")
@click.option("--router", "router_url", required=True, help="Router base URL, e.g. http://10.0.0.2:8080")
@click.option("--node", "node_url", required=True, help="Base URL of the vLLM server, e.g. http://10.0.0.5:8000")
@click.option("--model-dir", required=True, type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="The artifact the node serves; its format is read from here")
@click.option("--model", default=None, help="Logical model [the deployment id]")
@click.option("--deployment", default=None, help="Deployment (artifact) id [the model directory's name]")
@click.option("--hardware", default="unknown", show_default=True, help="Hardware class key, e.g. a100-80g")
@click.option("--vram-gb", type=click.FloatRange(min=0, min_open=True), default=None)
@click.option("--token", envvar=TOKEN_ENV, default=None, help=f"Admin bearer token [${TOKEN_ENV[0]}]")
@click.option("--dry-run", is_flag=True, help="Print the registration instead of sending it")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="HTTP timeout in seconds")
def register_cmd(router_url: str, node_url: str, model_dir: Path, model: str | None, deployment: str | None,
                 hardware: str, vram_gb: float | None, token: str | None, dry_run: bool, timeout: float) -> None:
    """Register NODE with ROUTER, with the format and tier read from MODEL_DIR (never from its name)."""
    from pydantic import ValidationError

    from quantroute.registrar import build_registration

    inspection = _inspect(model_dir)
    try:
        reg = build_registration(inspection, node_url=node_url, deployment=deployment or model_dir.resolve().name,
                                 model=model, hardware=hardware, vram_gb=vram_gb)
    except ValidationError as e:
        issues = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors(include_url=False))
        raise click.ClickException(f"invalid registration: {issues}") from None
    body = reg.model_dump(mode="json", exclude_none=True)
    if dry_run:
        click.echo(json.dumps(body, indent=2))
        return
    if not token:
        raise click.ClickException(f"--token: missing; the router's admin API needs a bearer token "
                                   f"(or set ${TOKEN_ENV[0]})")
    from quantroute.launcher.register import RegistrationError, post_registration

    try:
        status = post_registration(reg, router_url=router_url, token=token, timeout=timeout)
    except RegistrationError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"registered {reg.key} as {reg.deployment} (tier {reg.tier.value}, {reg.format}, "
               f"{reg.checksum[:19]}...) with {router_url}: {status}")


def _error_message(resp) -> str:
    try:
        return resp.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return resp.text[:500]


def _admin_call(method: str, router_url: str, path: str, token: str | None, by: str | None, timeout: float):
    import httpx

    if not token:
        raise click.ClickException(f"--token: missing; the router's admin API needs a bearer token "
                                   f"(or set ${TOKEN_ENV[0]})")
    url = router_url.rstrip("/") + path
    headers = {"authorization": f"Bearer {token}", **({"x-quantroute-actor": by} if by else {})}
    try:
        resp = httpx.request(method, url, headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise click.ClickException(f"--router: cannot reach {url}: {e}") from None
    if resp.status_code >= 300:
        raise click.ClickException(f"{url} answered {resp.status_code}: {_error_message(resp)}")
    return resp.json()


def _routers(value: str) -> list[str]:
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise click.BadParameter("give one router URL or several, comma-separated", param_hint="--router")
    return urls


ROUTER_OPT = click.option("--router", "routers", required=True,
                          help="Router base URL; several replicas comma-separated (each is told, each is waited for)")
BY_OPT = click.option("--by", default=None, help="Your name, for the audit log")


@node.command("deregister")
@ROUTER_OPT
@click.argument("node_id")
@click.option("--token", envvar=TOKEN_ENV, default=None, help=f"Admin bearer token [${TOKEN_ENV[0]}]")
@BY_OPT
@click.option("--timeout", type=float, default=10.0, show_default=True, help="HTTP timeout in seconds")
def deregister_cmd(routers: str, node_id: str, token: str | None, by: str | None, timeout: float) -> None:
    """Remove NODE_ID at once: no new request goes to it, probes stop, and replicas sharing the DB drop it too
    (requests already on it finish). Use `node drain` to wait for them first."""
    from urllib.parse import quote

    for url in _routers(routers):
        _admin_call("DELETE", url, f"/admin/nodes/{quote(node_id, safe='')}", token, by, timeout)
        click.echo(f"removed {node_id} from {url}")


@node.command("drain")
@ROUTER_OPT
@click.argument("node_id")
@click.option("--token", envvar=TOKEN_ENV, default=None, help=f"Admin bearer token [${TOKEN_ENV[0]}]")
@BY_OPT
@click.option("--wait", "wait_s", type=click.FloatRange(min=0), default=600.0, show_default=True,
              help="Longest wait, in seconds, for the node's in-flight requests to finish")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="HTTP timeout in seconds")
def drain_cmd(routers: str, node_id: str, token: str | None, by: str | None, wait_s: float, timeout: float) -> None:
    """Drain NODE_ID: stop new requests to it, wait until no router has a request in flight on it, then remove
    it. Exit 1, node left draining, if requests are still running after --wait seconds."""
    import time
    from urllib.parse import quote

    path = f"/admin/nodes/{quote(node_id, safe='')}"
    urls = _routers(routers)
    for url in urls:
        _admin_call("POST", url, path + "/drain", token, by, timeout)
    deadline = time.monotonic() + wait_s
    while True:
        inflight = {url: _admin_call("GET", url, path, token, by, timeout)["inflight"] for url in urls}
        if not any(inflight.values()):
            break
        if time.monotonic() >= deadline:
            busy = ", ".join(f"{u}: {n}" for u, n in inflight.items() if n)
            raise click.ClickException(f"{node_id} still has requests in flight after {wait_s:g}s ({busy}); it stays "
                                       "draining (no new requests). Run drain again or deregister it.")
        time.sleep(0.2)
    for url in urls:
        _admin_call("DELETE", url, path, token, by, timeout)
    click.echo(f"drained and removed {node_id} ({len(urls)} router(s))")
