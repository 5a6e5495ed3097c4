"""`quantroute sim`: serve every node of a fleet file as a simulated vLLM server until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import sys

import click
from rich.console import Console
from rich.table import Table

from quantroute import capacity as cap
from quantroute.catalog import DATA_DIR, load_hardware, load_models
from quantroute.fleet import Fleet, FleetError, load_fleet
from quantroute.sim.quality import DEFAULT_SUITES


def node_table(fleet: Fleet, *, time_scale: float, suite_items: int) -> Table:
    hardware, models = load_hardware(), load_models()
    table = Table(title=f"simulated fleet: {len(fleet.nodes)} nodes, time scale {time_scale:g}, "
                        f"{suite_items} eval items known (not vLLM: a simulator)")
    for col in ("node", "url", "deployment", "tier", "hardware", "max_num_seqs", "KV tokens", "step ms (b=1)"):
        table.add_column(col)
    for n in fleet.nodes:
        shape, gpu = models[fleet.shape_for(n)], hardware[n.hardware]
        fmt = cap.weight_format(n.deployment.format)
        table.add_row(n.id, n.url, n.deployment.id, n.deployment.tier.value, n.hardware, str(n.max_num_seqs),
                      f"{cap.kv_capacity_tokens(shape, fmt, gpu, vram_gb=n.vram_gb):,}",
                      f"{cap.decode_step_s(shape, fmt, gpu, batch=1, context_tokens=0) * 1e3:.2f}")
    return table


async def _serve(server) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.stop)
    await server.serve()


@click.command("sim")
@click.option("--fleet", "fleet_path", default=str(DATA_DIR / "fleet.yaml"),
              show_default="the packaged data/fleet.yaml",
              type=click.Path(dir_okay=False))
@click.option("--time-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="wall seconds per simulated second (0.01 = 100x faster, same ratios)")
@click.option("--suites", default=DEFAULT_SUITES, show_default="data/evals/*.jsonl",
              help="glob of eval suite JSONL files whose prompts get seeded right/wrong answers")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the quality model's decisions")
@click.option("--free-ports", is_flag=True, help="ignore the ports in the file and pick free ones")
def sim(fleet_path: str, time_scale: float, suites: str, seed: int, free_ports: bool) -> None:
    """Serve a fleet of simulated vLLM nodes (OpenAI API, /metrics) whose speed follows the capacity model."""
    from quantroute.sim.server import FleetServer
    from quantroute.tracing import Tracing, TracingUnavailable

    try:
        tracing = Tracing.from_env("quantroute-sim")
        fleet = load_fleet(fleet_path)
        server = FleetServer(fleet, time_scale=time_scale, suites=suites, seed=seed, free_ports=free_ports,
                             tracing=tracing)
    except (FleetError, OSError, TracingUnavailable) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    Console(width=160).print(node_table(server.fleet, time_scale=time_scale, suite_items=server.suite_items))
    click.echo("Ctrl-C stops all nodes." + (" Traces go to the OTEL_* exporter." if tracing else ""))
    try:
        asyncio.run(_serve(server))
    finally:
        if tracing is not None:
            tracing.shutdown()
