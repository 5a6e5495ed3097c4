"""Per-tier decode speed and memory of REAL vLLM (CPU) servers, next to the capacity model's GPU figures.

Every node of data/fleet-real-cpu-4tiers.yaml (bf16, fp8, int8, int4 of the tiny trained model) is started at
once, warmed up, and then measured ONE AT A TIME, tier after tier, for `--rounds` rounds (an idle vLLM server
costs next to no CPU): the tiers take turns on the same cores under the same background load, and each figure
is a median over rounds with its min-max spread. Each measurement is the load tester's staircase (closed loop,
streamed, fixed-length outputs). Resident memory is the sum over each server's process group. The baseline is
the bf16 server of the same rounds: each tier's output tok/s is printed as a ratio to it. The capacity model's
figures for llama3-8b on an A100-80GB (decode tok/s at batch 1 per format, weight GB) stand alongside: the GPU
model predicts int4 ~1.8x; a CPU with this tiny model may show no speed-up at all, and we say so.

    QUANTROUTE_VLLM_PYTHON=.venvs/vllm/bin/python .venv/bin/python benchmarks/real_tiers_cpu.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

from quantroute import capacity as cap
from quantroute.catalog import load_hardware, load_models
from quantroute.launcher.spec import load_real_fleet
from quantroute.launcher.vllm import running_fleet, vllm_python
from quantroute.loadtest.runner import LoadTestConfig, run_staircase
from quantroute.loadtest.traffic import TrafficLine
from quantroute.registrar import inspect_model_dir

REPO = Path(__file__).resolve().parent.parent
PROMPT = "Write JSON with name Ada and age 36."
GPU_FORMAT = {"bf16": "bf16", "fp8": "fp8", "int8": "int8", "int4": "int4"}


def group_rss_bytes(pgid: int) -> int:
    """Resident memory of every process in the process group (vLLM's API server, engine core, workers)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5 of /proc/PID/stat: the process group
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24: rss in pages
        except (OSError, IndexError, ValueError):
            continue
    return total


def traffic(max_tokens: int, model: str) -> list[TrafficLine]:
    # ignore_eos: every request decodes exactly max_tokens, so tok/s compares equal work across tiers
    body = {"model": model, "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True,
            "messages": [{"role": "user", "content": PROMPT}]}
    return [TrafficLine.model_validate({"session": None, "class": None, "body": body})]


def warm_up(node_url: str, deployment: str) -> None:
    with httpx.Client(timeout=300) as c:  # the first requests compile and allocate
        for _ in range(3):
            c.post(f"{node_url}/v1/chat/completions", json={
                "model": deployment, "max_tokens": 8, "messages": [{"role": "user", "content": PROMPT}]})


def measure(node_url: str, deployment: str, args) -> list:
    config = LoadTestConfig(url=node_url, model=deployment, staircase=args.staircase, step_seconds=args.step_seconds,
                            warmup_seconds=2.0, drain_seconds=120.0)
    result = asyncio.run(run_staircase(config, traffic(args.max_tokens, deployment)))
    return result.steps


def gpu_figures() -> dict[str, tuple[float, float]]:
    """format -> (decode tok/s at batch 1, weight GB) from the capacity model: llama3-8b on an A100-80GB."""
    shape, gpu = load_models()["llama3-8b"], load_hardware()["a100-80g"]
    out = {}
    for tier, name in GPU_FORMAT.items():
        fmt = cap.weight_format(name)
        out[tier] = (1.0 / cap.decode_step_s(shape, fmt, gpu, batch=1, context_tokens=512),
                     cap.weight_bytes(shape, fmt) / 1e9)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fleet", default=REPO / "data/fleet-real-cpu-4tiers.yaml", type=Path)
    ap.add_argument("--rounds", type=int, default=3, help="turns per tier; figures are medians with spreads")
    ap.add_argument("--step-seconds", type=float, default=10.0)
    ap.add_argument("--staircase", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    fleet = load_real_fleet(args.fleet)
    fleet.base_dir = str((REPO / fleet.base_dir).resolve())
    tiers = {n.deployment: inspect_model_dir(fleet.model_dir(n)).tier.value for n in fleet.nodes}
    best: dict[str, list[float]] = {d: [] for d in tiers}
    tpot: dict[str, list[float]] = {d: [] for d in tiers}
    with tempfile.TemporaryDirectory() as logs, running_fleet(
            fleet, python=vllm_python(), log_dir=Path(logs),
            progress=lambda n, s: print(f"  {n.node.id}: {s}", flush=True)) as nodes:
        rss = {n.node.deployment: group_rss_bytes(n.pid) for n in nodes}
        for n in nodes:
            warm_up(n.url, n.node.deployment)
        for rnd in range(args.rounds):
            for n in nodes:  # the tiers take turns: same cores, same background, one server busy at a time
                steps = measure(n.url, n.node.deployment, args)
                best[n.node.deployment].append(max(s.output_tok_s for s in steps))
                tpot[n.node.deployment].append(steps[0].tpot_p50_ms or 0.0)
                print(f"round {rnd + 1}: {n.node.deployment}: output tok/s "
                      + ", ".join(f"c={s.concurrency}: {s.output_tok_s:.0f}" for s in steps), flush=True)
    gpu = gpu_figures()
    base_dep = next(d for d, t in tiers.items() if t == "fp16")
    # Per round, each tier over bf16 of the same round: the ratio cancels what the round's load did to both.
    print(f"\nreal vLLM {fleet.model} on this CPU ({os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end; {args.max_tokens}-token outputs; staircase "
          f"{args.staircase}; {args.rounds} rounds, median [min-max]) vs the capacity model (llama3-8b, A100, batch 1)")
    print(f"{'deployment':<28} {'tier':<5} {'best tok/s':>16} {'vs bf16':>17} {'TPOT ms (c=1)':>14} "
          f"{'RSS GiB':>8} | {'GPU tok/s':>9} {'vs fp16':>8} {'weights GB':>10}")
    for dep, tier in tiers.items():
        ratios = [b / base for b, base in zip(best[dep], best[base_dep])]
        g_tok, g_gb = gpu["bf16" if tier == "fp16" else tier]
        print(f"{dep:<28} {tier:<5} {_spread(best[dep], '{:.0f}'):>16} {_spread(ratios, '{:.2f}x'):>17} "
              f"{statistics.median(tpot[dep]):>14.1f} {rss[dep] / 2**30:>8.2f} | {g_tok:>9.0f} "
              f"{g_tok / gpu['bf16'][0]:>7.2f}x {g_gb:>10.1f}")
    return 0


def _spread(values: list[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


if __name__ == "__main__":
    sys.exit(main())
