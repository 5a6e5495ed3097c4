"""Small but real model artifacts for the registrar tests: config.json plus safetensors files written with
the `safetensors` package from numpy arrays. numpy has no bfloat16 or float8, so those tensors are saved
with same-width unsigned storage (U16 / U8) and their dtype is then rewritten in the header, which is
exactly what a BF16 / F8_E4M3 file looks like on disk."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

H = 256  # hidden size: two groups of 128 for group-quantized layouts
V = 64  # vocabulary
PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
STORAGE = {"BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8}


def patch_dtypes(path: Path, new: dict[str, str]) -> None:
    """Rewrite tensor dtypes in a safetensors header (same element width), keeping the data bytes."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    for name, dtype in new.items():
        header[name]["dtype"] = dtype
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8-byte alignment
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def write_tensors(path: Path, tensors: dict[str, tuple[str, tuple[int, ...]]], seed: int = 0) -> None:
    """tensors: name -> (safetensors dtype, shape), filled with seeded random bytes."""
    rng = np.random.default_rng(seed)
    arrays, patches = {}, {}
    for name, (dtype, shape) in tensors.items():
        np_dtype = STORAGE.get(dtype) or {"F16": np.float16, "F32": np.float32, "I32": np.int32, "I8": np.int8,
                                          "U8": np.uint8, "I64": np.int64}[dtype]
        arrays[name] = rng.integers(0, 100, size=shape).astype(np_dtype)
        if dtype in STORAGE:
            patches[name] = dtype
    save_file(arrays, str(path))
    if patches:
        patch_dtypes(path, patches)


def float_layer(dtype: str, layer: int = 0) -> dict:
    return {f"model.layers.{layer}.{p}.weight": (dtype, (H, H)) for p in PROJ} | {
        f"model.layers.{layer}.input_layernorm.weight": (dtype, (H,))}


def edges(dtype: str) -> dict:
    return {"model.embed_tokens.weight": (dtype, (V, H)), "model.norm.weight": (dtype, (H,)),
            "lm_head.weight": (dtype, (V, H))}


def awq_layer(bits: int = 4, group: int = 128) -> dict:
    pack = 32 // bits
    out = {}
    for p in PROJ:
        base = f"model.layers.0.{p}"
        out |= {f"{base}.qweight": ("I32", (H, H // pack)), f"{base}.qzeros": ("I32", (H // group, H // pack)),
                f"{base}.scales": ("F16", (H // group, H))}
    return out


def gptq_layer(bits: int = 4, group: int = 128) -> dict:
    pack = 32 // bits
    out = {}
    for p in PROJ:
        base = f"model.layers.0.{p}"
        out |= {f"{base}.qweight": ("I32", (H // pack, H)), f"{base}.qzeros": ("I32", (H // group, H // pack)),
                f"{base}.scales": ("F16", (H // group, H)), f"{base}.g_idx": ("I32", (H,))}
    return out


def fp8_layer() -> dict:
    out = {}
    for p in PROJ:
        base = f"model.layers.0.{p}"
        out |= {f"{base}.weight": ("F8_E4M3", (H, H)), f"{base}.weight_scale": ("F32", (1,)),
                f"{base}.input_scale": ("F32", (1,))}
    return out


def int8_layer() -> dict:
    out = {}
    for p in PROJ:
        base = f"model.layers.0.{p}"
        out |= {f"{base}.weight": ("I8", (H, H)), f"{base}.weight_scale": ("BF16", (H, 1))}
    return out


def packed_ct_layer() -> dict:
    out = {}
    for p in PROJ:
        base = f"model.layers.0.{p}"
        out |= {f"{base}.weight_packed": ("I32", (H, H // 8)), f"{base}.weight_scale": ("BF16", (H, H // 128)),
                f"{base}.weight_shape": ("I64", (2,))}
    return out


def llama_config(**extra) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
            "num_hidden_layers": 1, "vocab_size": V} | extra


