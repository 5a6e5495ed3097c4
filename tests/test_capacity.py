"""The capacity model against numbers computed by hand from the models' config.json and the datasheets."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from quantroute import capacity as cap
from quantroute.catalog import load_hardware, load_models
from quantroute.cli.capacity import capacity as capacity_cmd

HW = load_hardware()
MODELS = load_models()
L8, L13, L70 = MODELS["llama3-8b"], MODELS["llama-13b"], MODELS["llama3-70b"]
FP16, FP8, INT8, INT4 = (cap.FORMATS[k] for k in ("fp16", "fp8", "int8", "int4"))


def test_kv_bytes_per_token_is_2_layers_kvheads_headdim_elem():
    assert cap.kv_bytes_per_token(L8) == 2 * 32 * 8 * 128 * 2 == 131072
    assert cap.kv_bytes_per_token(L8, "fp8") == 65536  # the KV dtype is separate from the weight format
    assert cap.kv_bytes_per_token(L13) == 2 * 40 * 40 * 128 * 2 == 819200  # Llama-2-13B has no GQA
    assert cap.kv_bytes_per_token(L70) == 2 * 80 * 8 * 128 * 2 == 327680


def test_shapes_match_the_published_parameter_counts():
    # layer = q,o (h*h each) + k,v (h*kv_dim each) + MLP 3*h*inter + 2 norms; plus embed, lm_head, final norm
    h, kv, inter = 4096, 8 * 128, 14336
    layer = 2 * h * h + 2 * h * kv + 3 * h * inter + 2 * h
    assert 32 * layer + 2 * 128256 * h + h == L8.params == 8_030_261_248


def test_weight_bytes_per_format():
    assert cap.weight_bytes(L8, FP16) == 8_030_261_248 * 2 == 16_060_522_496
    embed_and_head = 2 * 128256 * 4096  # kept at 16 bit by AWQ/GPTQ/FP8 checkpoints
    linear = 8_030_261_248 - embed_and_head
    assert cap.weight_bytes(L8, FP8) == linear * 1 + embed_and_head * 2
    # INT4 g128: 0.5 byte per weight + (2-byte scale + 0.5-byte zero point) per 128 weights
    assert cap.weight_bytes(L8, INT4) == linear // 2 + linear * 25 // 1280 + embed_and_head * 2 == 5_727_460_432
    # a smaller group size costs more scale overhead
    assert cap.weight_bytes(L8, INT4, group_size=32) > cap.weight_bytes(L8, INT4)


def test_max_concurrency_llama3_8b_fp16_on_a100_80g():
    usable = int(80 * 2**30 * 0.9)
    free = usable - 16_060_522_496 - int(1.5 * 2**30)
    blocks = free // (16 * 131072)
    assert cap.kv_capacity_tokens(L8, FP16, HW["a100-80g"]) == blocks * 16 == 454_992
    assert cap.max_concurrency(L8, FP16, HW["a100-80g"], 8192) == blocks // 512 == 55
    # INT4 frees weight memory for KV cache; FP8 KV doubles the tokens that fit
    assert cap.max_concurrency(L8, INT4, HW["a100-80g"], 8192) == 65
    assert cap.max_concurrency(L8, FP16, HW["a100-80g"], 8192, kv_dtype="fp8") == 2 * blocks // 512


def test_a_format_that_does_not_fit():
    plan = cap.plan(L70, HW["a100-80g"], FP16, context=8192)
    assert not plan.fits and plan.max_concurrency == 0 and "weights need" in plan.note
    assert cap.plan(L70, HW["a100-80g"], INT4, context=8192).fits


@pytest.mark.parametrize(("gpu", "fmt", "speedup"), [
    ("a100-80g", INT4, 1.8), ("a100-40g", INT4, 1.8), ("rtx-4090", INT4, 1.4),
    ("a100-80g", FP8, 1.0), ("h100-80g", FP8, 1.6), ("a100-80g", INT8, 1.3),
])
def test_weight_read_time_is_fp16_divided_by_the_gpu_speedup(gpu, fmt, speedup):
    g = HW[gpu]
    assert cap.weight_read_s(L8, FP16, g) / cap.weight_read_s(L8, fmt, g) == pytest.approx(speedup, rel=1e-12)
    assert cap.weight_read_s(L8, FP16, g) == pytest.approx(cap.decode_read_bytes(L8, FP16) / (g.bandwidth_gbs * 1e9))


def test_decode_step_int4_vs_fp16_on_a100_within_10_percent_of_the_configured_factor():
    g = HW["a100-80g"]
    ratio = (cap.decode_step_s(L8, FP16, g, batch=1, context_tokens=128)
             / cap.decode_step_s(L8, INT4, g, batch=1, context_tokens=128))
    assert ratio == pytest.approx(1.8, rel=0.10)
    assert 1.7 < ratio <= 1.8  # the per-sequence term, equal for both, only dilutes the factor


def test_decode_step_grows_with_batch_and_context():
    g = HW["a100-80g"]
    one = cap.decode_step_s(L8, FP16, g, batch=1, context_tokens=1000)
    assert cap.decode_step_s(L8, FP16, g, batch=8, context_tokens=8000) > one
    kv_term = 7000 * 131072 / (g.bandwidth_gbs * 1e9) + 7 * g.per_seq_overhead_us * 1e-6
    assert cap.decode_step_s(L8, FP16, g, batch=8, context_tokens=8000) - one == pytest.approx(kv_term)
    assert cap.decode_step_s(L8, FP16, g, batch=0, context_tokens=0) == 0.0
    assert cap.prefill_s(L8, g, 1000) == pytest.approx(2 * L8.params * 1000 / (312e12 * 0.5))


def test_unknown_format_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid formats: fp16, bf16, fp8, int8, int4"):
        cap.weight_format("int3")


def test_capacity_cli_prints_every_format_and_says_what_does_not_fit():
    out = CliRunner().invoke(capacity_cmd, ["--model", "llama3-8b", "--gpu", "a100-80g", "--context", "8192"])
    assert out.exit_code == 0, out.output
    for text in ("fp16", "fp8", "int8", "int4", "131,072", "454,992"):
        assert text in out.output
    out = CliRunner().invoke(capacity_cmd, ["--model", "llama3-70b", "--gpu", "a100-40g"])
    assert out.exit_code == 0 and "does not fit" in out.output
    out = CliRunner().invoke(capacity_cmd, ["--model", "llama3-8b", "--gpu", "v100"])
    assert out.exit_code == 2 and "a100-80g" in out.output and "--gpu" in out.output
    assert math.isfinite(cap.plan(L8, HW["l4-24g"], INT4, context=4096).tok_s_batch)
