"""`quantroute fleet up`: bring a fleet up and keep it up until Ctrl-C. `--engine sim` serves a simulated fleet
(as `quantroute sim`); `--engine vllm` starts one real vLLM server per node of a real-fleet file, registers each
with a router (tier and format read from the artifact) and stops every process group on the way out."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

TOKEN_ENV = ["QUANTROUTE_ADMIN_TOKEN", "QUANTROUTE_ROUTER_ADMIN_TOKEN"]


@click.group("fleet")
def fleet() -> None:
    """Start fleets of vLLM nodes: simulated, or real vLLM servers on this machine."""


@fleet.command("up")
@click.option("--engine", type=click.Choice(["sim", "vllm"]), default="sim", show_default=True)
@click.option("--fleet", "fleet_path", required=True, type=click.Path(path_type=Path, dir_okay=False, exists=True),
              help="sim: a fleet file (data/fleet.yaml); vllm: a real-fleet file (data/fleet-real-cpu.yaml)")
@click.option("--router", "router_url", default=None, help="Register every node with this router (vllm engine)")
@click.option("--token", envvar=TOKEN_ENV, default=None, help=f"Router admin token [${TOKEN_ENV[0]}]")
@click.option("--python", "python", default=None, help="Python of vLLM's venv [$QUANTROUTE_VLLM_PYTHON]")
@click.option("--log-dir", type=click.Path(path_type=Path, file_okay=False), default=Path(".fleet-logs"),
              show_default=True)
@click.pass_context
def up(ctx: click.Context, engine: str, fleet_path: Path, router_url: str | None, token: str | None,
       python: str | None, log_dir: Path) -> None:
    """Start every node of FLEET and keep them up until Ctrl-C (or SIGTERM)."""
    if engine == "sim":
        from quantroute.cli.sim import sim

        ctx.invoke(sim, fleet_path=str(fleet_path))
        return
    if router_url and not token:
        raise click.BadParameter("a router's admin API needs a bearer token", param_hint="--token")
    from quantroute.launcher import vllm
    from quantroute.launcher.register import RegistrationError, register_artifact
    from quantroute.launcher.spec import RealFleetError, load_real_fleet

    try:
        spec = load_real_fleet(fleet_path)
        interpreter = vllm.vllm_python(python)
    except (RealFleetError, vllm.LaunchError) as e:
        raise click.ClickException(str(e)) from None
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    def say(n, s) -> None:
        click.echo(f"  {n.node.id:<10} {s}")

    click.echo(f"starting {len(spec.nodes)} vLLM servers from {fleet_path} (~3.3 GB RAM each, 25-55 s to ready)")
    try:
        with vllm.running_fleet(spec, python=interpreter, log_dir=log_dir, progress=say) as nodes:
            for n in nodes:
                if router_url and token:
                    reg = register_artifact(model_dir=n.model_dir, node_url=n.url, deployment=n.node.deployment,
                                            model=spec.model, hardware=spec.hardware, router_url=router_url,
                                            token=token)
                    say(n, f"registered with {router_url} as {reg.deployment}: tier {reg.tier.value}, "
                           f"{reg.format}, {reg.method}, {reg.checksum[:19]}...")
            click.echo("fleet up: " + ", ".join(f"{n.node.id}={n.url}" for n in nodes) + "; Ctrl-C stops all")
            stop.wait()
            click.echo("stopping every vLLM process group ...")
    except (vllm.LaunchError, RegistrationError, ValueError) as e:
        raise click.ClickException(str(e)) from None
