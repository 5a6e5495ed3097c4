"""`quantroute node inspect|register`: read what a model directory really holds and register a node
serving it with a router. The decision lives in quantroute.registrar; this module only does I/O."""

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
    """Inspect model artifacts and register vLLM nodes with a router."""


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

