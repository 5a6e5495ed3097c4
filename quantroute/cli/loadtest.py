"""`quantroute loadtest`: the staircase load test (thin: parses options, calls quantroute.loadtest)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
from rich.console import Console


def _staircase(ctx, param, value: str) -> list[int]:
    try:
        steps = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r}: give comma-separated integers, e.g. 1,2,4,8") from None
    if not steps:
        raise click.BadParameter("give at least one step, e.g. 1,2,4,8")
    return steps


def _png_wanted(png: bool | None) -> bool:
    """Decided before the run, so a missing renderer never costs a finished run its results."""
    from importlib.util import find_spec

    if find_spec("vl_convert") is not None:
        return png is not False
    if png:
        raise click.UsageError("--png needs vl-convert-python: pip install 'quantroute[png]' (or pass --no-png)")
    click.echo("note: no PNG chart (vl-convert-python is not installed: pip install 'quantroute[png]'); "
               "the HTML chart is written", err=True)
    return False


@click.command("loadtest")
@click.option("--url", required=True, help="Base URL of the router (or one node), without /v1")
@click.option("--model", required=True, help="Model name sent in every request (replaces the file's)")
@click.option("--traffic", "traffic_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Traffic mix, JSON Lines (data/traffic/README.md)")
@click.option("--prompts", "prompts_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Plain prompts, one per line (sent as single chat requests)")
@click.option("--max-tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="max_tokens for --prompts")
@click.option("--staircase", callback=_staircase, default="1,2,4,8,16,32", show_default=True,
              help="Concurrency per step (with --rate: multipliers of the rate)")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Open loop: Poisson arrivals/s at staircase value 1 (a session counts as one arrival)")
@click.option("--step-seconds", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True)
@click.option("--warmup-seconds", type=click.FloatRange(min=0), default=5.0, show_default=True)
@click.option("--slo-p95-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop when end-to-end p95 exceeds this")
@click.option("--slo-ttft-p95-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop when TTFT p95 exceeds this")
@click.option("--max-error-rate", type=click.FloatRange(0, 1), default=0.01, show_default=True)
@click.option("--min-gain", type=click.FloatRange(min=0), default=0.05, show_default=True,
              help="Stop when a step adds less than this share of output tok/s")
@click.option("--deployment", default=None, help="Label the run with this deployment id (default: the one "
              "deployment the responses named, if only one)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for loadtest.json/.csv/.html/.png [data/loadtests/<timestamp>]")
@click.option("--png/--no-png", "png", default=None,
              help="Write the PNG chart (needs the 'png' extra: pip install 'quantroute[png]') [when installed]")
@click.option("--db", "db_url", default=None, help="Database URL [$DATABASE_URL or sqlite:///data/quantroute.db]")
@click.option("--no-db", is_flag=True, help="Do not store the run in the database")
def loadtest(url, model, traffic_path, prompts_path, max_tokens, staircase, rate, step_seconds, warmup_seconds,
             slo_p95_ms, slo_ttft_p95_ms, max_error_rate, min_gain, deployment, out_dir, png, db_url,
             no_db) -> None:
    """Staircase load test: run each step, stop at the first that breaks an SLO, raises the error rate or adds
    no throughput; write JSON, CSV and a chart; store the run in the database."""
    from quantroute.clock import utcnow
    from quantroute.loadtest.progress import LiveProgress
    from quantroute.loadtest.report import steps_table, write_all
    from quantroute.loadtest.runner import LoadTestConfig, run_staircase
    from quantroute.loadtest.stats import Slo
    from quantroute.loadtest.traffic import TrafficError, load_traffic, prompts_as_traffic, with_model

    if (traffic_path is None) == (prompts_path is None):
        raise click.UsageError("give exactly one of --traffic FILE or --prompts FILE")
    png = _png_wanted(png)
    try:
        lines = (with_model(load_traffic(traffic_path), model) if traffic_path
                 else prompts_as_traffic(prompts_path, model=model, max_tokens=max_tokens))
        config = LoadTestConfig(url=url, model=model, source=str(traffic_path or prompts_path), staircase=staircase,
                                rate=rate, step_seconds=step_seconds, warmup_seconds=warmup_seconds,
                                slo=Slo(p95_ms=slo_p95_ms, ttft_p95_ms=slo_ttft_p95_ms,
                                        max_error_rate=max_error_rate, min_gain=min_gain), deployment=deployment)
    except (TrafficError, ValueError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    console = Console()
    with LiveProgress(Console(stderr=True), total_steps=len(staircase)) as progress:
        result = asyncio.run(run_staircase(config, lines, progress=progress))
    console.print(steps_table(result))
    console.print(f"stopped: {result.stop_reason}" if result.stop_reason else "every step met its limits")
    if result.best:
        console.print(f"highest step within limits: {result.best.load}, {result.best.output_tok_s:.0f} output tok/s")
    out_dir = out_dir or Path("data/loadtests") / utcnow().strftime("%Y%m%dT%H%M%SZ")
    paths = write_all(result, out_dir, png=png)
    console.print("wrote " + ", ".join(str(p) for p in paths.values()))
    if not no_db:
        from quantroute.cli.database import open_engine
        from quantroute.db.engine import session
        from quantroute.db.loadtest import save_result

        engine = open_engine(db_url)
        with session(engine) as s:
            run = save_result(session=s, result=result, out_dir=str(out_dir))
            s.commit()
            console.print(f"stored as loadtest_run {run.id}")
        engine.dispose()
    sys.exit(0 if result.best is not None else 1)
