"""Format and tier detection from real safetensors files and config.json, never the directory name."""

from __future__ import annotations

import hashlib
import json

import pytest

from quantroute.registrar import InspectionError, build_registration, inspect_model_dir
from quantroute.tiers import Tier
from tests.registrar.model_files import (
    awq_layer,
    edges,
    float_layer,
    fp8_layer,
    gptq_layer,
    int8_layer,
    llama_config,
    packed_ct_layer,
    patch_dtypes,
    write_tensors,
)

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
BNB4_ROWS = 256 * 256 // 2  # bitsandbytes stores two 4-bit values per byte, as a [n, 1] U8 tensor
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def ct_config(num_bits: int, kind: str, fmt: str, act_bits: int | None) -> dict:
    weights = {"num_bits": num_bits, "type": kind, "symmetric": True, "strategy": "channel", "group_size": None}
    act = {"num_bits": act_bits, "type": kind, "dynamic": True, "strategy": "token"} if act_bits else None
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": act}}}


def test_bf16_checkpoint_is_fp16_tier(make_model):
    d = make_model("llama-bf16", llama_config(torch_dtype="bfloat16"), edges("BF16") | float_layer("BF16"))
    r = inspect_model_dir(d)
    assert (r.format, r.tier, r.method, r.bits, r.scheme) == ("bf16", Tier.fp16, "none", 16, "w16a16")
    assert r.dtype_histogram == {"BF16": 11}
    assert r.dtype_bytes["BF16"] == 2 * (2 * 64 * 256 + 7 * 256 * 256 + 2 * 256)
    assert r.warnings == []


def test_fp16_checkpoint_and_dtype_mismatch_warning(make_model):
    d = make_model("llama", llama_config(torch_dtype="bfloat16"), edges("F16") | float_layer("F16"))
    r = inspect_model_dir(d)
    assert (r.format, r.tier) == ("fp16", Tier.fp16)
    assert "torch_dtype is bfloat16 but the weights are F16" in r.warnings[0]


def test_fp8_checkpoint(make_model):
    cfg = llama_config(torch_dtype="bfloat16", quantization_config={"quant_method": "fp8",
                                                                    "activation_scheme": "dynamic"})
    r = inspect_model_dir(make_model("llama-fp8", cfg, edges("BF16") | fp8_layer()))
    assert (r.format, r.tier, r.method, r.bits, r.scheme) == ("fp8", Tier.fp8, "fp8", 8, "w8a8")
    assert r.dtype_histogram["F8_E4M3"] == 7
    assert any("7 tensors are an fp8 weight" in e for e in r.evidence)


def test_compressed_tensors_fp8(make_model):
    cfg = llama_config(quantization_config=ct_config(8, "float", "float-quantized", 8))
    r = inspect_model_dir(make_model("m", cfg, edges("BF16") | fp8_layer()))
    assert (r.format, r.tier, r.method) == ("fp8", Tier.fp8, "compressed-tensors")


def test_misleading_directory_name_awq_is_int4(make_model):
    """Seed 003 sec. 7.2: the name says fp16, the artifact is AWQ 4-bit."""
    d = make_model("model-fp16", llama_config(torch_dtype="float16", quantization_config=AWQ),
                   edges("F16") | awq_layer())
    r = inspect_model_dir(d)
    assert (r.format, r.tier, r.method, r.bits, r.group_size, r.scheme) == ("int4", Tier.int4, "awq", 4, 128, "w4a16")
    assert r.dtype_histogram == {"I32": 14, "F16": 10}
    assert any("4-bit, group_size 128" in e for e in r.evidence)


def test_gptq_int4_and_int8(make_model):
    r4 = inspect_model_dir(make_model("g4", llama_config(quantization_config=GPTQ), edges("F16") | gptq_layer()))
    assert (r4.format, r4.tier, r4.method, r4.bits) == ("int4", Tier.int4, "gptq", 4)
    r8 = inspect_model_dir(make_model("g8", llama_config(quantization_config=GPTQ | {"bits": 8}),
                                      edges("F16") | gptq_layer(bits=8)))
    assert (r8.format, r8.tier, r8.bits, r8.scheme) == ("int8", Tier.int8, 8, "w8a16")


def test_int8_w8a8_compressed_tensors(make_model):
    cfg = llama_config(quantization_config=ct_config(8, "int", "int-quantized", 8))
    r = inspect_model_dir(make_model("w8a8", cfg, edges("BF16") | int8_layer()))
    assert (r.format, r.tier, r.scheme, r.method) == ("int8", Tier.int8, "w8a8", "compressed-tensors")
    assert r.dtype_histogram["I8"] == 7


def test_compressed_tensors_pack_quantized_int4(make_model):
    cfg = llama_config(quantization_config=ct_config(4, "int", "pack-quantized", None))
    r = inspect_model_dir(make_model("w4a16", cfg, edges("BF16") | packed_ct_layer()))
    assert (r.format, r.tier, r.scheme) == ("int4", Tier.int4, "w4a16")


def test_compressed_tensors_int_quantized_int4_is_int4(make_model):
    # W4A8 (int4 weights, int8 activations) keeps one 4-bit value per int8: int4 tier, not a packing conflict
    cfg = llama_config(quantization_config=ct_config(4, "int", "int-quantized", 8))
    r = inspect_model_dir(make_model("w4a8", cfg, edges("BF16") | int8_layer()))
    assert (r.format, r.tier, r.bits, r.scheme) == ("int4", Tier.int4, 4, "w4a8")


def test_bitsandbytes_4bit(make_model):
    cfg = llama_config(quantization_config={"quant_method": "bitsandbytes", "load_in_4bit": True,
                                            "bnb_4bit_quant_type": "nf4"})
    tensors = edges("BF16") | {f"model.layers.0.{p}.weight": ("U8", (BNB4_ROWS, 1)) for p in ("mlp.up_proj",)}
    r = inspect_model_dir(make_model("bnb", cfg, tensors))
    assert (r.format, r.tier, r.method) == ("int4", Tier.int4, "bitsandbytes")



@pytest.mark.parametrize(("quant", "match"), [
    ({"quant_method": "awq", "bits": 4}, "says awq .* no tensor is packed int32 .* 11 BF16"),
    ({"quant_method": "fp8"}, "says fp8 .* no tensor is an fp8 weight"),
    ({"quant_method": "gptq", "bits": 8}, "says gptq \\(int8, 8-bit\\)"),
])
def test_config_claim_without_tensor_evidence_is_a_conflict(make_model, quant, match):
    d = make_model("liar", llama_config(quantization_config=quant), edges("BF16") | float_layer("BF16"))
    with pytest.raises(InspectionError, match=f"conflicting evidence: config.json quantization_config {match}"):
        inspect_model_dir(d)


def test_quantized_tensors_without_config_is_missing_evidence(make_model):
    d = make_model("no-config-awq", llama_config(torch_dtype="float16"), edges("F16") | awq_layer())
    with pytest.raises(InspectionError, match="missing evidence: config.json has no quantization_config but 7 "
                                              "tensors are packed int32"):
        inspect_model_dir(d)


def test_bits_disagreeing_with_packing_is_a_conflict(make_model):
    d = make_model("awq8", llama_config(quantization_config=AWQ | {"bits": 8}), edges("F16") | awq_layer(bits=4))
    with pytest.raises(InspectionError, match="bits is 8 but .* pack 8 values per int32, i.e. 4-bit"):
        inspect_model_dir(d)


def test_group_size_disagreeing_with_scales_is_a_conflict(make_model):
    d = make_model("g64", llama_config(quantization_config=GPTQ | {"group_size": 64}),
                   edges("F16") | gptq_layer(group=128))
    with pytest.raises(InspectionError, match="group_size is 64 but the scales shapes imply group_size 128"):
        inspect_model_dir(d)


def test_per_channel_awq_layout(make_model):
    d = make_model("pc", llama_config(quantization_config=AWQ | {"group_size": -1}),
                   edges("F16") | awq_layer(group=256))
    r = inspect_model_dir(d)
    assert (r.tier, r.group_size) == (Tier.int4, -1)
    assert any("group_size -1" in e for e in r.evidence)


@pytest.mark.parametrize(("quant", "match"), [
    ({"quant_method": "hqq"}, "quant_method: 'hqq' is not known; valid: awq, awq_marlin, gptq"),
    ({"quant_method": "gptq", "bits": 3}, "quantization_config.bits: bits=3 has no tier; valid: 4"),
    ({"quant_method": "bitsandbytes"}, "bitsandbytes without load_in_4bit or load_in_8bit"),
    ({"quant_method": "compressed-tensors", "config_groups": {}}, "config_groups: missing"),
])
def test_unusable_quantization_config_names_the_field(make_model, quant, match):
    d = make_model("bad", llama_config(quantization_config=quant), edges("F16") | awq_layer())
    with pytest.raises(InspectionError, match=match):
        inspect_model_dir(d)


def test_missing_files_and_broken_headers(make_model, tmp_path):
    with pytest.raises(InspectionError, match="config.json: missing"):
        inspect_model_dir(make_model("noconf", None, edges("F16")))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps(llama_config()))
    with pytest.raises(InspectionError, match="no \\*.safetensors files"):
        inspect_model_dir(empty)
    (empty / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(InspectionError, match="header length .* does not fit in a 64-byte file"):
        inspect_model_dir(empty)
    (empty / "model.safetensors").write_bytes((5).to_bytes(8, "little") + b"{oops")
    with pytest.raises(InspectionError, match="header is not valid JSON"):
        inspect_model_dir(empty)


def test_unknown_dtype_in_header_is_named(make_model):
    d = make_model("odd", llama_config(), edges("F16"))
    patch_dtypes(d / "model.safetensors", {"lm_head.weight": "Q4"})
    with pytest.raises(InspectionError, match="tensor 'lm_head.weight' has unknown dtype 'Q4'"):
        inspect_model_dir(d)


def test_checksum_streams_all_shards_in_name_order(make_model):
    d = make_model("sharded", llama_config(quantization_config=AWQ), edges("F16") | awq_layer(), shards=3)
    r = inspect_model_dir(d)
    assert r.files == [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert r.tier == Tier.int4
    expected = hashlib.sha256(b"".join((d / f).read_bytes() for f in r.files)).hexdigest()
    assert r.checksum == f"sha256:{expected}"
    # One changed data byte (not the header) changes the checksum and nothing else.
    f = d / r.files[0]
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0xFF
    f.write_bytes(bytes(raw))
    again = inspect_model_dir(d)
    assert again.checksum != r.checksum and again.tier == r.tier


def test_build_registration_takes_format_from_the_inspection(make_model):
    d = make_model("model-fp16", llama_config(quantization_config=AWQ), edges("F16") | awq_layer())
    reg = build_registration(inspect_model_dir(d), node_url="http://10.0.0.5:8000", deployment="llama-awq",
                             model="llama", hardware="a100-80g", vram_gb=80)
    assert (reg.tier, reg.format, reg.method, reg.model) == (Tier.int4, "int4", "awq", "llama")
    assert reg.checksum.startswith("sha256:") and reg.key == "http://10.0.0.5:8000"


def test_write_tensors_roundtrip_through_safetensors(tmp_path):
    """The helper's patched files are real safetensors: the library itself reads the patched dtypes."""
    from safetensors import safe_open

    p = tmp_path / "x.safetensors"
    write_tensors(p, {"a": ("BF16", (2, 3)), "b": ("F8_E4M3", (4,)), "c": ("I32", (1, 2))})
    with safe_open(str(p), framework="numpy") as f:
        assert f.get_slice("a").get_dtype() == "BF16" and f.get_slice("b").get_dtype() == "F8_E4M3"
        assert f.get_tensor("c").shape == (1, 2)


def test_one_group_per_row_only_matches_per_channel_or_the_layer_width(make_model):
    cfg = llama_config(quantization_config=AWQ | {"group_size": 128})
    with pytest.raises(InspectionError, match="group_size is 128 but the scales shapes imply group_size 256"):
        inspect_model_dir(make_model("one-group", cfg, edges("F16") | awq_layer(group=256)))
    r = inspect_model_dir(make_model("layer-wide", llama_config(quantization_config=AWQ | {"group_size": 256}),
                                     edges("F16") | awq_layer(group=256)))
    assert r.group_size == 256
