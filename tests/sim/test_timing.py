"""Decode speed follows the capacity model: an INT4 node on the same GPU decodes 1.8x faster than FP16 (A100)."""

from __future__ import annotations

import time

import httpx
import pytest

from quantroute import capacity as cap
from quantroute.catalog import load_hardware, load_models
from quantroute.sim.runner import running_fleet

from .conftest import make_fleet
from .test_metrics import scrape, value

A100 = load_hardware()["a100-80g"]
L8 = load_models()["llama3-8b"]
CONFIGURED = A100.decode_speedup["int4"]


def test_nodes_use_the_capacity_models_step_times(sim):
    steps = {n: httpx.get(sim.urls[n] + "/sim/info").json()["decode_step_s_batch1"] for n in ("fp16", "int4")}
    assert steps["fp16"] == cap.decode_step_s(L8, cap.FORMATS["bf16"], A100, batch=1, context_tokens=0)
    assert steps["int4"] == cap.decode_step_s(L8, cap.FORMATS["int4"], A100, batch=1, context_tokens=0)
    assert steps["fp16"] / steps["int4"] == pytest.approx(CONFIGURED, rel=0.10)


def itl_mean(url: str, tokens: int) -> float:
    """Mean inter-token latency (simulated seconds) of one request alone on the node, from its metrics."""
    before = scrape(url)
    body = {"model": "llama3-8b", "prompt": "timing", "max_tokens": tokens, "ignore_eos": True}
    assert httpx.post(url + "/v1/completions", json=body, timeout=30).status_code == 200
    after = scrape(url)
    total = value(after, "vllm:inter_token_latency_seconds_sum") - value(before, "vllm:inter_token_latency_seconds_sum")
    itl_count = "vllm:inter_token_latency_seconds_count"
    count = value(after, itl_count) - value(before, itl_count)
    assert count == tokens - 1
    return total / count


def test_int4_decodes_faster_than_fp16_by_the_configured_factor_in_the_nodes_metrics(sim):
    ratio = itl_mean(sim.urls["fp16"], 200) / itl_mean(sim.urls["int4"], 200)
    assert ratio == pytest.approx(CONFIGURED, rel=0.10)


def test_latency_factor_fault_slows_every_step(sim):
    url = sim.urls["int4"]
    base = itl_mean(url, 50)
    httpx.post(url + "/sim/faults", json={"latency_factor": 3}).raise_for_status()
    try:
        assert itl_mean(url, 50) == pytest.approx(3 * base, rel=0.02)
    finally:
        httpx.post(url + "/sim/faults", json={"latency_factor": 1}).raise_for_status()


def decode_wall_s(url: str, tokens: int) -> float:
    """Wall seconds from the first streamed token to the last."""
    body = {"model": "llama3-8b", "prompt": "wall", "max_tokens": tokens, "ignore_eos": True, "stream": True}
    stamps = []
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                stamps.append(time.perf_counter())
    assert len(stamps) == tokens
    return stamps[-1] - stamps[0]


def test_measured_token_pace_keeps_the_ratio_loosely(suites):
    """Real streamed timing on a noisy machine: only a loose band, on durations of a few hundred ms, where the
    engine's catch-up keeps the average pace exact and scheduler noise is a few percent."""
    with running_fleet(make_fleet(), time_scale=0.5, suites=suites) as rf:
        fp16 = decode_wall_s(rf.urls["fp16"], 120)
        int4 = decode_wall_s(rf.urls["int4"], 120)
    assert 1.3 < fp16 / int4 < 2.5


def test_ttft_of_a_lone_request_is_its_prefill_plus_one_decode_step(sim):
    url = sim.urls["int4"]
    before = scrape(url)
    body = {"model": "llama3-8b", "prompt": "x" * 400, "max_tokens": 1}  # 100 prompt tokens
    assert httpx.post(url + "/v1/completions", json=body).status_code == 200
    after = scrape(url)
    ttft = value(after, "vllm:time_to_first_token_seconds_sum") - value(before, "vllm:time_to_first_token_seconds_sum")
    expected = (cap.prefill_s(L8, A100, 100)
                + cap.decode_step_s(L8, cap.FORMATS["int4"], A100, batch=1, context_tokens=100))
    assert ttft == pytest.approx(expected, rel=1e-6)


def _clock_and_tokens(metrics) -> tuple[float, float]:
    from prometheus_client.parser import text_string_to_metric_families

    from quantroute.sim.metrics import SIM_CLOCK

    got = {s.name: s.value for fam in text_string_to_metric_families(metrics.render().decode()) for s in fam.samples}
    return got["vllm:generation_tokens_total"], got[SIM_CLOCK]


def test_a_host_stall_costs_simulated_time_not_tokens_per_simulated_second():
    """The engine forgives a stall of its loop (a busy core) instead of jumping its clock: its clock gauge then
    runs behind the wall clock, and tokens over that clock still give the model's rate, where tokens over the
    wall clock read low. The fleet experiment's throughput is taken over this clock."""
    import asyncio

    from quantroute.sim import text
    from quantroute.sim.engine import MAX_CATCH_UP_S, NodeEngine, Sequence, StepModel
    from quantroute.sim.metrics import NodeMetrics

    step_s, batch = 0.01, 4

    async def go() -> tuple[float, float, float]:
        metrics = NodeMetrics(model_name="m")
        e = NodeEngine(model=StepModel(decode_step_s=lambda b, ctx: step_s, prefill_s=lambda n: 0.0,
                                       kv_capacity_tokens=10**6),
                       max_num_seqs=batch, time_scale=1.0, metrics=metrics)
        runner = asyncio.create_task(e.run())
        for _ in range(batch):
            e.submit(Sequence(prompt_tokens=8, output=text.Output(["x"] * 10**5, "length")))
        await asyncio.sleep(0.2)
        (tok0, clk0), wall0 = _clock_and_tokens(metrics), time.monotonic()
        for _ in range(3):
            time.sleep(4 * MAX_CATCH_UP_S)  # the host stalls the engine's loop
            await asyncio.sleep(0.1)
        (tok1, clk1), wall1 = _clock_and_tokens(metrics), time.monotonic()
        runner.cancel()
        return tok1 - tok0, clk1 - clk0, wall1 - wall0

    tokens, sim_s, wall_s = asyncio.run(go())
    model_rate = batch / step_s
    assert sim_s < 0.6 * wall_s  # most of the three stalls was forgiven, not simulated
    assert tokens / sim_s == pytest.approx(model_rate, rel=0.1)
    assert tokens / wall_s < 0.7 * model_rate
