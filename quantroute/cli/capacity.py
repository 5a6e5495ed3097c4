"""`quantroute capacity`: weights, KV cache, concurrency and decode speed of each format of a model on a GPU."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from quantroute import capacity as cap
from quantroute.catalog import CatalogError, load_hardware, load_models, pick


def render(rows: list[cap.FormatPlan], *, title: str) -> Table:
    table = Table(title=title)
    for col in ("format", "tier", "weights GiB", "KV B/token", "KV tokens", "max conc.", "kernel x",
                "tok/s 1 seq", "tok/s batch", "note"):
        table.add_column(col, justify="left" if col in ("format", "tier", "note") else "right")
    for r in rows:
        table.add_row(
            r.format, r.tier.value, f"{r.weight_bytes / cap.GIB:.2f}", f"{r.kv_bytes_per_token:,}",
            f"{r.kv_capacity_tokens:,}", str(r.max_concurrency), f"{r.kernel_factor:.2f}",
            f"{r.tok_s_single:,.0f}" if r.fits else "-",
            f"{r.tok_s_batch:,.0f} (x{r.batch})" if r.fits else "-",
            ("[red]does not fit: [/red]" if not r.fits else "") + r.note,
        )
    return table


@click.command("capacity")
@click.option("--model", "model_key", required=True, help="model shape key in data/models.yaml, e.g. llama3-8b")
@click.option("--gpu", "gpu_key", required=True, help="hardware key in data/hardware.yaml, e.g. a100-80g")
@click.option("--context", type=click.IntRange(min=1), default=8192, show_default=True,
              help="tokens per sequence (prompt + output) for the concurrency figure")
@click.option("--kv-dtype", type=click.Choice(sorted(cap.KV_DTYPE_BYTES)), default="auto", show_default=True,
              help="KV-cache dtype (separate from the weight format; auto = 16 bit)")
@click.option("--max-num-seqs", type=click.IntRange(min=1), default=256, show_default=True,
              help="batch cap used for the batch throughput column (vLLM's default)")
def capacity(model_key: str, gpu_key: str, context: int, kv_dtype: str, max_num_seqs: int) -> None:
    """Memory plan per weight format: weights, KV per token, max concurrency at --context, est. decode tok/s."""
    try:
        shape = pick(load_models(), model_key, "model (--model)")
        gpu = pick(load_hardware(), gpu_key, "gpu (--gpu)")
    except CatalogError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    formats = [f for name, f in cap.FORMATS.items() if name != "bf16"]  # bf16 is fp16's twin in memory and speed
    rows = [cap.plan(shape, gpu, f, context=context, kv_dtype=kv_dtype, max_num_seqs=max_num_seqs) for f in formats]
    title = (f"{shape.name} on {gpu.name} ({gpu.vram_gb:g} GB, {gpu.bandwidth_gbs:g} GB/s), context {context}, "
             f"KV {kv_dtype}, {cap.GPU_MEMORY_UTILIZATION:.0%} of VRAM, "
             f"{cap.WORKSPACE_BYTES / cap.GIB:g} GiB workspace")
    Console(width=160).print(render(rows, title=title))
    if context > shape.max_position:
        click.echo(f"note: {shape.name} was trained for {shape.max_position} tokens; --context {context} exceeds it")
