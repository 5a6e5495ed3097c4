"""Per-tier decode speed and memory of REAL vLLM (CPU) servers, next to the capacity model's GPU figures.

Each node of data/fleet-real-cpu.yaml (bf16, int8, int4 of the tiny trained model) is started ALONE (so the
tiers do not share the 2 cores), warmed up, and driven by the load tester's staircase (closed loop, streamed,
fixed-length outputs); its server's resident memory is the sum over its process group. The baseline measured
in the same run is the bf16 server: each tier's output tok/s is printed as a ratio to it. The capacity model's
figures for llama3-8b on an A100-80GB (decode tok/s at batch 1 per format, weights bytes) stand alongside:
the GPU model predicts int4 ~1.8x; a CPU with this tiny model may show no speed-up at all, and we say so.

    QUANTROUTE_VLLM_PYTHON=.venvs/vllm/bin/python .venv/bin/python benchmarks/real_tiers_cpu.py [--step-seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
GPU_FORMAT = {"bf16": "bf16", "int8": "int8", "int4": "int4"}


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


def measure(node_url: str, deployment: str, args) -> list:
    with httpx.Client(timeout=300) as c:  # warm-up: the first requests compile and allocate
        for _ in range(3):
            c.post(f"{node_url}/v1/chat/completions", json={
                "model": deployment, "max_tokens": 8, "messages": [{"role": "user", "content": PROMPT}]})
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
    ap.add_argument("--fleet", default=REPO / "data/fleet-real-cpu.yaml", type=Path)
    ap.add_argument("--step-seconds", type=float, default=15.0)
    ap.add_argument("--staircase", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    fleet = load_real_fleet(args.fleet)
    fleet.base_dir = str((REPO / fleet.base_dir).resolve())
    python = vllm_python()
    rows = []
    for node in fleet.nodes:
        single = fleet.model_copy(update={"nodes": [node]})
        tier = inspect_model_dir(fleet.model_dir(node)).tier.value
        with tempfile.TemporaryDirectory() as logs, running_fleet(single, python=python, log_dir=Path(logs)) as [n]:
            rss = group_rss_bytes(n.pid)
            steps = measure(n.url, node.deployment, args)
            rows.append((node.deployment, tier, n.ready_s, rss, steps))
        print(f"{node.deployment}: ready in {n.ready_s:.0f} s, RSS {rss / 2**30:.2f} GiB, output tok/s "
              + ", ".join(f"c={s.concurrency}: {s.output_tok_s:.0f}" for s in steps), flush=True)
    gpu = gpu_figures()
    base = max(s.output_tok_s for s in rows[0][4])
    print(f"\nreal vLLM {fleet.model} on this CPU (each server alone; {args.max_tokens}-token outputs; "
          f"staircase {args.staircase}) vs the capacity model (llama3-8b, A100-80GB, batch 1)")
    print(f"{'deployment':<24} {'tier':<5} {'best tok/s':>10} {'vs bf16':>8} {'TPOT p50 ms (c=1)':>18} "
          f"{'RSS GiB':>8} | {'GPU model tok/s':>15} {'vs fp16':>8} {'weights GB':>10}")
    for dep, tier, _ready, rss, steps in rows:
        best = max(s.output_tok_s for s in steps)
        g_tok, g_gb = gpu["bf16" if tier == "fp16" else tier]
        print(f"{dep:<24} {tier:<5} {best:>10.0f} {best / base:>7.2f}x {steps[0].tpot_p50_ms or 0:>18.1f} "
              f"{rss / 2**30:>8.2f} | {g_tok:>15.0f} {g_tok / gpu['bf16'][0]:>7.2f}x {g_gb:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
