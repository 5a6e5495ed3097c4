"""The capacity model: how much memory a deployment needs on a GPU, how many sequences fit, and how long a decode
step takes. Pure arithmetic over typed inputs; `quantroute.catalog` loads the inputs from data/*.yaml.

The same numbers drive the `quantroute capacity` planner and the simulated fleet's timing, so what the planner
prints is what the simulator does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from quantroute.tiers import Tier

GIB = 1024**3


class ModelShape(BaseModel):
    """The architecture figures that decide memory and decode cost (from the model's config.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    params: int = Field(gt=0, description="Total parameter count, embeddings included")
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab: int = Field(gt=0)
    tied_embeddings: bool = False
    max_position: int = Field(gt=0, description="Longest context the model was trained for")

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def unquantized_params(self) -> int:
        """AWQ/GPTQ/FP8 checkpoints keep the input embedding and the LM head at 16 bit."""
        return self.embedding_params * (1 if self.tied_embeddings else 2)


class GpuSpec(BaseModel):
    """One hardware class. `decode_speedup` is the measured decode speed-up of a format over FP16 on this GPU
    at equal batch size (seed 000: INT4 1.7-1.9x on A100, 1.3-1.5x on RTX 4090); formats not listed run at 1.0."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    name: str
    arch: str
    vram_gb: float = Field(gt=0, description="As marketed; read as GiB (an 80 GB A100 shows 81920 MiB)")
    bandwidth_gbs: float = Field(gt=0, description="Peak memory bandwidth, GB/s (1e9 bytes)")
    bf16_tflops: float = Field(gt=0, description="Dense BF16/FP16 tensor throughput")
    decode_speedup: dict[str, float] = Field(default_factory=dict)
    per_seq_overhead_us: float = Field(default=20.0, ge=0, description="Sampling/scheduling cost per sequence per step")


@dataclass(frozen=True)
class WeightFormat:
    """How a weight format stores one parameter. Scales (and zero points) are per group of `group_size`
    weights; None means per-tensor/per-channel scales, whose size is negligible next to the weights."""

    name: str
    tier: Tier
    bits: int
    group_size: int | None = None
    scale_bytes: float = 0.0
    zero_bytes: float = 0.0

    def bytes_per_param(self, group_size: int | None = None) -> float:
        g = group_size or self.group_size
        overhead = (self.scale_bytes + self.zero_bytes) / g if g else 0.0
        return self.bits / 8 + overhead


# AWQ-style INT4: groups of 128 weights share an FP16 scale and a packed 4-bit zero point.
FORMATS: dict[str, WeightFormat] = {
    "fp16": WeightFormat("fp16", Tier.fp16, 16),
    "bf16": WeightFormat("bf16", Tier.fp16, 16),
    "fp8": WeightFormat("fp8", Tier.fp8, 8),
    "int8": WeightFormat("int8", Tier.int8, 8),
    "int4": WeightFormat("int4", Tier.int4, 4, group_size=128, scale_bytes=2.0, zero_bytes=0.5),
}
KV_DTYPE_BYTES: dict[str, int] = {"auto": 2, "fp16": 2, "bf16": 2, "fp8": 1}

# vLLM defaults: it budgets 90 % of VRAM and pages the KV cache in blocks of 16 tokens.
GPU_MEMORY_UTILIZATION = 0.9
BLOCK_SIZE = 16
# CUDA context, CUDA graphs and the peak activations of one prefill chunk (vLLM profiles this at start-up;
# 1.5 GiB is what it typically reports for 7-13B models).
WORKSPACE_BYTES = int(1.5 * GIB)
# Model FLOPs utilisation reached by prefill (compute bound), a typical figure for well-tuned kernels.
PREFILL_MFU = 0.5


def weight_format(name: str) -> WeightFormat:
    try:
        return FORMATS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown weight format {name!r}; valid formats: {', '.join(FORMATS)}") from None


def weight_bytes(shape: ModelShape, fmt: WeightFormat, group_size: int | None = None) -> int:
    """Bytes of weights in VRAM: quantized linear layers plus the 16-bit embedding and LM head."""
    if fmt.bits == 16:
        return shape.params * 2
    quantized = shape.params - shape.unquantized_params
    return math.ceil(quantized * fmt.bytes_per_param(group_size)) + shape.unquantized_params * 2


def decode_read_bytes(shape: ModelShape, fmt: WeightFormat) -> int:
    """Weight bytes read per decode step: everything but the input embedding table, of which a step reads
    one row per sequence."""
    input_embedding = 0 if shape.tied_embeddings else shape.embedding_params * 2
    return weight_bytes(shape, fmt) - input_embedding


def kv_bytes_per_token(shape: ModelShape, kv_dtype: str = "auto") -> int:
    """K and V for every layer and KV head; the KV dtype is separate from the weight format."""
    try:
        elem = KV_DTYPE_BYTES[kv_dtype]
    except KeyError:
        raise ValueError(f"unknown kv dtype {kv_dtype!r}; valid: {', '.join(KV_DTYPE_BYTES)}") from None
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * elem


def usable_vram_bytes(gpu: GpuSpec, vram_gb: float | None = None) -> int:
    return int((vram_gb or gpu.vram_gb) * GIB * GPU_MEMORY_UTILIZATION)


def kv_capacity_tokens(shape: ModelShape, fmt: WeightFormat, gpu: GpuSpec, *, kv_dtype: str = "auto",
                       vram_gb: float | None = None) -> int:
    """Tokens the KV cache can hold, whole blocks only; 0 when the weights do not fit."""
    free = usable_vram_bytes(gpu, vram_gb) - weight_bytes(shape, fmt) - WORKSPACE_BYTES
    if free <= 0:
        return 0
    blocks = free // (BLOCK_SIZE * kv_bytes_per_token(shape, kv_dtype))
    return int(blocks * BLOCK_SIZE)


def max_concurrency(shape: ModelShape, fmt: WeightFormat, gpu: GpuSpec, context: int, *,
                    kv_dtype: str = "auto", vram_gb: float | None = None) -> int:
    """Sequences of `context` tokens that fit at once (each needs whole blocks)."""
    blocks_per_seq = math.ceil(context / BLOCK_SIZE)
    blocks = kv_capacity_tokens(shape, fmt, gpu, kv_dtype=kv_dtype, vram_gb=vram_gb) // BLOCK_SIZE
    return blocks // blocks_per_seq


def decode_speedup(gpu: GpuSpec, fmt: WeightFormat) -> float:
    return 1.0 if fmt.bits == 16 else gpu.decode_speedup.get(fmt.name, 1.0)


def kernel_factor(shape: ModelShape, fmt: WeightFormat, gpu: GpuSpec) -> float:
    """How much slower than bandwidth-ideal a format's kernels read its weights, relative to FP16's.
    Chosen so the weight-read term is exactly FP16's divided by the GPU's measured speed-up: INT4 reads ~3.4x
    fewer bytes but dequantisation keeps its gain at ~1.8x on A100."""
    fp16 = decode_read_bytes(shape, FORMATS["fp16"])
    return fp16 / decode_read_bytes(shape, fmt) / decode_speedup(gpu, fmt)


def weight_read_s(shape: ModelShape, fmt: WeightFormat, gpu: GpuSpec) -> float:
    return decode_read_bytes(shape, fmt) / (gpu.bandwidth_gbs * 1e9) * kernel_factor(shape, fmt, gpu)


def decode_step_s(shape: ModelShape, fmt: WeightFormat, gpu: GpuSpec, *, batch: int, context_tokens: int,
                  kv_dtype: str = "auto") -> float:
    """One decode step for `batch` sequences holding `context_tokens` tokens in total: the weights are read
    once for the whole batch; each sequence adds its KV read and a fixed per-sequence cost."""
    if batch <= 0:
        return 0.0
    kv_s = context_tokens * kv_bytes_per_token(shape, kv_dtype) / (gpu.bandwidth_gbs * 1e9)
    return weight_read_s(shape, fmt, gpu) + kv_s + batch * gpu.per_seq_overhead_us * 1e-6


def prefill_s(shape: ModelShape, gpu: GpuSpec, prompt_tokens: int) -> float:
    """Prefill is compute bound: 2 FLOPs per parameter per token. Weight-only formats compute in 16 bit,
    so the cost does not depend on the format."""
    return 2 * shape.params * prompt_tokens / (gpu.bf16_tflops * 1e12 * PREFILL_MFU)


class FormatPlan(BaseModel):
    """One row of the capacity planner: a format of a model on a GPU at a context length."""

    format: str
    tier: Tier
    weight_bytes: int
    kv_bytes_per_token: int
    kv_capacity_tokens: int
    max_concurrency: int
    kernel_factor: float
    step_s_single: float
    tok_s_single: float
    batch: int
    tok_s_batch: float
    fits: bool
    note: str = ""


def plan(shape: ModelShape, gpu: GpuSpec, fmt: WeightFormat, *, context: int, kv_dtype: str = "auto",
         max_num_seqs: int = 256) -> FormatPlan:
    """Memory and decode speed of one format; throughput is for the largest batch that fits (capped at
    vLLM's default max_num_seqs), each sequence half way through its context."""
    w = weight_bytes(shape, fmt)
    conc = max_concurrency(shape, fmt, gpu, context, kv_dtype=kv_dtype)
    fits = conc >= 1
    note = ""
    if w + WORKSPACE_BYTES > usable_vram_bytes(gpu):
        note = f"weights need {w / GIB:.1f} GiB; only {usable_vram_bytes(gpu) / GIB:.1f} GiB usable"
    elif not fits:
        note = f"weights fit but not one {context}-token sequence of KV cache"
    elif fmt.name == "fp8" and decode_speedup(gpu, fmt) <= 1.0:
        note = "no FP8 speed-up on this GPU (Hopper and newer only)"
    single = decode_step_s(shape, fmt, gpu, batch=1, context_tokens=context // 2, kv_dtype=kv_dtype)
    batch = min(conc, max_num_seqs)
    step = decode_step_s(shape, fmt, gpu, batch=batch, context_tokens=batch * context // 2, kv_dtype=kv_dtype)
    return FormatPlan(
        format=fmt.name, tier=fmt.tier, weight_bytes=w, kv_bytes_per_token=kv_bytes_per_token(shape, kv_dtype),
        kv_capacity_tokens=kv_capacity_tokens(shape, fmt, gpu, kv_dtype=kv_dtype), max_concurrency=conc,
        kernel_factor=kernel_factor(shape, fmt, gpu), step_s_single=single,
        tok_s_single=1 / single if fits else 0.0, batch=batch, tok_s_batch=batch / step if batch else 0.0,
        fits=fits, note=note,
    )
