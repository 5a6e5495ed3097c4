"""Capacity: the memory planner, interactive. Model shape (from data/models.yaml or edited), GPU, context and
concurrency -> weights, KV cache and headroom per weight format, with decode speed estimates."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, ui
from quantroute import capacity as cap
from quantroute.catalog import load_hardware, load_models


def plan_frame(shape: cap.ModelShape, gpu: cap.GpuSpec, *, context: int, concurrency: int,
               kv_dtype: str = "auto") -> pd.DataFrame:
    """One row per format: weights, KV cache for `concurrency` sequences of `context` tokens, headroom."""
    usable = (cap.usable_vram_bytes(gpu) - cap.WORKSPACE_BYTES) / cap.GIB
    rows = []
    for name, fmt in cap.FORMATS.items():
        if name == "bf16":
            continue  # fp16's twin in memory and speed
        p = cap.plan(shape, gpu, fmt, context=context, kv_dtype=kv_dtype)
        weights = p.weight_bytes / cap.GIB
        kv = p.kv_bytes_per_token * context * concurrency / cap.GIB
        rows.append({"format": p.format, "tier": p.tier.value, "weights GiB": weights,
                     "KV GiB (at concurrency)": kv, "headroom GiB": usable - weights - kv,
                     "max concurrency": p.max_concurrency, "fits": weights + kv <= usable,
                     "tok/s (1 seq)": round(p.tok_s_single), "tok/s (batch)": round(p.tok_s_batch),
                     "note": p.note})
    return pd.DataFrame(rows)


def render() -> None:
    st.title("Capacity")
    models, hardware = load_models(), load_hardware()
    c1, c2, c3, c4 = st.columns(4)
    model_key = c1.selectbox("Model shape", sorted(models), index=sorted(models).index("llama3-8b")
                             if "llama3-8b" in models else 0)
    gpu_key = c2.selectbox("GPU", sorted(hardware), index=sorted(hardware).index("a100-80g")
                           if "a100-80g" in hardware else 0, format_func=lambda k: hardware[k].name)
    context = int(c3.number_input("Context (tokens per sequence)", 256, 1_048_576, 8192, 256))
    concurrency = int(c4.number_input("Concurrent sequences", 1, 4096, 32, 1))
    kv_dtype = st.radio("KV-cache dtype", sorted(cap.KV_DTYPE_BYTES), horizontal=True,
                        index=sorted(cap.KV_DTYPE_BYTES).index("auto"))
    shape = models[model_key]
    with st.expander("Edit the model shape"):
        cols = st.columns(4)
        fields = {}
        for i, f in enumerate(("params", "layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "max_position")):
            fields[f] = int(cols[i % 4].number_input(f, min_value=1, value=int(getattr(shape, f)), key=f"cap_{f}"))
        shape = shape.model_copy(update=fields)
    gpu = hardware[gpu_key]
    df = plan_frame(shape, gpu, context=context, concurrency=concurrency, kv_dtype=kv_dtype)
    usable = (cap.usable_vram_bytes(gpu) - cap.WORKSPACE_BYTES) / cap.GIB
    st.caption(f"{gpu.name}: {gpu.vram_gb:g} GB, {cap.GPU_MEMORY_UTILIZATION:.0%} usable by vLLM minus "
               f"{cap.WORKSPACE_BYTES / cap.GIB:g} GiB workspace = {usable:.1f} GiB for weights and KV cache")
    st.altair_chart(charts.capacity(df, usable), width="stretch")
    ui.table(df.round(2), f"capacity-{model_key}-{gpu_key}")
    if context > shape.max_position:
        st.warning(f"{shape.name} was trained for {shape.max_position} tokens; {context} exceeds it")
