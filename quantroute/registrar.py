"""What a model directory really is: format, method, bits, group size and tier, decided from the evidence
in the artifact itself — `config.json`'s `quantization_config` and the dtypes/shapes in the safetensors
headers — and never from the directory name (names lie: "model-fp16" may hold AWQ weights).

`decide_format` is the pure core (config dict + tensor headers in, decision out). `inspect_model_dir` is
the I/O edge: it reads the files, checksums them and calls the core.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from quantroute.node import NodeIdentity
from quantroute.safetensors_header import HeaderError, TensorHeader, read_header
from quantroute.tiers import Tier

Format = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
# What the tensors must show for a config claim to be believed.
Expect = Literal["packed_int", "fp8", "int8", "uint8"]

FLOAT_FORMATS: dict[str, Format] = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}
FP8_DTYPES = ("F8_E4M3", "F8_E5M2")
PACKED_SUFFIXES = (".qweight", ".weight_packed", ".B")
GPTQ_FAMILY = ("gptq", "gptq_marlin", "marlin")
AWQ_FAMILY = ("awq", "awq_marlin")
KNOWN_METHODS = (*AWQ_FAMILY, *GPTQ_FAMILY, "fp8", "fbgemm_fp8", "compressed-tensors", "bitsandbytes")
FORMAT_TIER: dict[str, Tier] = {"fp32": Tier.fp16, "bf16": Tier.fp16, "fp16": Tier.fp16,
                                "fp8": Tier.fp8, "int8": Tier.int8, "int4": Tier.int4}
READ_CHUNK = 4 * 1024 * 1024


class InspectionError(ValueError):
    """The artifact's evidence is missing or contradicts itself; the message says which field and file."""


class FormatDecision(BaseModel):
    """What the pure core concludes from config + headers."""

    format: Format
    tier: Tier
    method: str = Field(description="none, awq, gptq, fp8, compressed-tensors, bitsandbytes, ...")
    bits: int = Field(description="Weight bits per element")
    group_size: int | None = Field(default=None, description="Quantization group size; -1 = per channel")
    scheme: str = Field(description="Weight/activation widths, e.g. w16a16, w8a8, w4a16")
    torch_dtype: str | None = None
    dtype_histogram: dict[str, int] = Field(description="Tensor count per safetensors dtype")
    dtype_bytes: dict[str, int] = Field(description="Bytes per safetensors dtype")
    evidence: list[str] = Field(description="Why: each fact the decision rests on")
    warnings: list[str] = Field(default_factory=list)


class ModelInspection(FormatDecision):
    """A decision plus the artifact's identity: what `quantroute node inspect` prints."""

    model_dir: str
    files: list[str]
    total_bytes: int
    checksum: str = Field(description="sha256 over the safetensors files' bytes, in file-name order")


class _Claim(BaseModel):
    """What config.json says about quantization."""

    method: str
    format: Format
    bits: int
    group_size: int | None = None
    activations_bits: int = 16
    expect: Expect


# ---------------------------------------------------------------- config.json


def _tier_format(bits: int, where: str) -> Format:
    if bits == 4:
        return "int4"
    if bits == 8:
        return "int8"
    raise InspectionError(f"{where}: bits={bits} has no tier; valid: 4 (int4) or 8 (int8)")


def _compressed_tensors_claim(qc: dict[str, Any]) -> _Claim:
    groups = qc.get("config_groups") or {}
    if not groups:
        raise InspectionError("config.json quantization_config.config_groups: missing; compressed-tensors "
                              "needs at least one group with 'weights'")
    claims: list[_Claim] = []
    for name, group in groups.items():
        w = group.get("weights") or {}
        where = f"config.json quantization_config.config_groups.{name}.weights"
        bits, kind = w.get("num_bits"), w.get("type", "int")
        if not isinstance(bits, int):
            raise InspectionError(f"{where}.num_bits: missing; expected 4 or 8")
        act = group.get("input_activations")
        act_bits = act.get("num_bits", 16) if isinstance(act, dict) else 16
        if kind == "float" and bits == 8:
            fmt, expect = "fp8", "fp8"
        elif kind == "int":
            fmt = _tier_format(bits, f"{where}.num_bits")
            # "pack-quantized" packs eight 4-bit values per int32; "int-quantized" keeps one value per int8
            # (int4 weights with int8 activations, W4A8, are stored that way)
            storage = group.get("format") or qc.get("format")
            expect = "int8" if bits == 8 or storage == "int-quantized" else "packed_int"
        else:
            raise InspectionError(f"{where}: type={kind!r} num_bits={bits} has no tier; valid: "
                                  "float/8 (fp8), int/8 (int8), int/4 (int4)")
        claims.append(_Claim(method="compressed-tensors", format=fmt, bits=bits, group_size=w.get("group_size"),
                             activations_bits=act_bits, expect=expect))
    # Mixed groups: the least faithful one decides the tier, since some layers run at that precision.
    return max(claims, key=lambda c: FORMAT_TIER[c.format].rank)


def config_claim(config: dict[str, Any]) -> _Claim | None:
    """The quantization config.json declares, or None for an unquantized checkpoint."""
    qc = config.get("quantization_config") or config.get("compression_config")
    if not qc:
        return None
    method = str(qc.get("quant_method", "")).lower()
    where = "config.json quantization_config"
    if method in AWQ_FAMILY or method in GPTQ_FAMILY:
        bits = qc.get("bits", qc.get("w_bit", 4))
        group = qc.get("group_size", qc.get("q_group_size"))
        return _Claim(method=method, format=_tier_format(bits, f"{where}.bits"), bits=bits, group_size=group,
                      expect="packed_int")
    if method in ("fp8", "fbgemm_fp8"):
        block = qc.get("weight_block_size")
        return _Claim(method=method, format="fp8", bits=8, group_size=block[-1] if block else None,
                      activations_bits=8, expect="fp8")
    if method == "compressed-tensors":
        return _compressed_tensors_claim(qc)
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            return _Claim(method=method, format="int4", bits=4, group_size=qc.get("bnb_4bit_blocksize", 64),
                          expect="uint8")
        if qc.get("load_in_8bit"):
            return _Claim(method=method, format="int8", bits=8, expect="int8")
        raise InspectionError(f"{where}: bitsandbytes without load_in_4bit or load_in_8bit set to true")
    raise InspectionError(f"{where}.quant_method: {method or 'missing'!r} is not known; valid: "
                          f"{', '.join(KNOWN_METHODS)}")


# ---------------------------------------------------------------- tensors


def _is_weight(t: TensorHeader) -> bool:
    return t.name.endswith(".weight") and len(t.shape) == 2


def _evidence_count(tensors: Sequence[TensorHeader], expect: Expect) -> int:
    match expect:
        case "packed_int":
            return sum(t.dtype == "I32" and t.name.endswith(PACKED_SUFFIXES) for t in tensors)
        case "fp8":
            return sum(t.dtype in FP8_DTYPES and _is_weight(t) for t in tensors)
        case "int8":
            return sum(t.dtype == "I8" and _is_weight(t) for t in tensors)
        case "uint8":
            return sum(t.dtype == "U8" and _is_weight(t) for t in tensors)


def _histogram(tensors: Sequence[TensorHeader]) -> str:
    counts = Counter(t.dtype for t in tensors)
    return ", ".join(f"{n} {d}" for d, n in counts.most_common())


def packed_layout(tensors: Sequence[TensorHeader]) -> tuple[int, int, int] | None:
    """(bits, group_size, in_features) read off the shapes of the first qweight/qzeros/scales triple (AWQ or GPTQ
    layout), or None when the checkpoint has no such triple. qzeros pack 32/bits values per int32 along
    the output dim in both layouts; qweight packs along the output dim in AWQ and the input dim in GPTQ."""
    by_name = {t.name: t for t in tensors}
    for t in tensors:
        if not t.name.endswith(".qweight") or len(t.shape) != 2:
            continue
        prefix = t.name[: -len(".qweight")]
        zeros, scales = by_name.get(f"{prefix}.qzeros"), by_name.get(f"{prefix}.scales")
        if zeros is None or scales is None or len(zeros.shape) != 2 or len(scales.shape) != 2:
            continue
        pack, rest = divmod(scales.shape[1], zeros.shape[1])
        if rest or pack not in (4, 8):
            return None
        in_features = t.shape[0] * pack if t.shape[1] == scales.shape[1] else t.shape[0]
        return 32 // pack, in_features // scales.shape[0], in_features
    return None


def _check_packed(claim: _Claim, tensors: Sequence[TensorHeader]) -> list[str]:
    layout = packed_layout(tensors)
    if layout is None:
        return []
    bits, group, in_features = layout
    if bits != claim.bits:
        raise InspectionError(f"config.json quantization_config.bits is {claim.bits} but the qweight/qzeros/"
                              f"scales shapes pack {32 // bits} values per int32, i.e. {bits}-bit weights")
    # A group as wide as the layer is per-channel, which configs spell -1.
    per_channel = group == in_features and claim.group_size == -1
    if claim.group_size is not None and group != claim.group_size and not per_channel:
        raise InspectionError(f"config.json quantization_config.group_size is {claim.group_size} but the "
                              f"scales shapes imply group_size {group}")
    return [f"qweight/qzeros/scales shapes: {bits}-bit, group_size {-1 if per_channel else group}"]


def _dominant_float(tensors: Sequence[TensorHeader]) -> str | None:
    sizes: Counter[str] = Counter()
    for t in tensors:
        if t.dtype in FLOAT_FORMATS and _is_weight(t):
            sizes[t.dtype] += t.nbytes
    return sizes.most_common(1)[0][0] if sizes else None


# ---------------------------------------------------------------- the decision


def decide_format(config: dict[str, Any], tensors: Sequence[TensorHeader]) -> FormatDecision:
    """Format and tier from config.json and the tensor headers; raises InspectionError when they disagree
    or when either is silent."""
    if not tensors:
        raise InspectionError("no tensors in the safetensors headers; nothing to inspect")
    torch_dtype = config.get("torch_dtype") or config.get("dtype")
    histogram = dict(Counter(t.dtype for t in tensors).most_common())
    dtype_bytes: Counter[str] = Counter()
    for t in tensors:
        dtype_bytes[t.dtype] += t.nbytes
    common = {"torch_dtype": torch_dtype, "dtype_histogram": histogram, "dtype_bytes": dict(dtype_bytes)}
    claim = config_claim(config)
    if claim is None:
        return _unquantized(tensors, torch_dtype, common)
    found = _evidence_count(tensors, claim.expect)
    if found == 0:
        raise InspectionError(
            f"conflicting evidence: config.json quantization_config says {claim.method} ({claim.format}, "
            f"{claim.bits}-bit) but no tensor is {_EXPECT_TEXT[claim.expect]}; the tensors are: "
            f"{_histogram(tensors)}")
    evidence = [f"config.json quantization_config.quant_method={claim.method}, bits={claim.bits}",
                f"{found} tensors are {_EXPECT_TEXT[claim.expect]}"]
    if claim.expect == "packed_int":
        evidence += _check_packed(claim, tensors)
    return FormatDecision(format=claim.format, tier=FORMAT_TIER[claim.format], method=claim.method,
                          bits=claim.bits, group_size=claim.group_size,
                          scheme=f"w{claim.bits}a{claim.activations_bits}", evidence=evidence, **common)


_EXPECT_TEXT: dict[Expect, str] = {
    "packed_int": "packed int32 (qweight / weight_packed)",
    "fp8": f"an fp8 weight ({' or '.join(FP8_DTYPES)})",
    "int8": "an I8 weight",
    "uint8": "a packed U8 weight (bitsandbytes 4-bit)",
}


def _unquantized(tensors: Sequence[TensorHeader], torch_dtype: str | None, common: dict) -> FormatDecision:
    for expect in ("packed_int", "fp8", "int8"):
        n = _evidence_count(tensors, expect)
        if n:
            raise InspectionError(
                f"missing evidence: config.json has no quantization_config but {n} tensors are "
                f"{_EXPECT_TEXT[expect]}; add the quantization_config the checkpoint was made with")
    dominant = _dominant_float(tensors)
    if dominant is None:
        raise InspectionError(f"no 2-D float '.weight' tensor found; the tensors are: {_histogram(tensors)}")
    fmt = FLOAT_FORMATS[dominant]
    warnings = []
    declared = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(torch_dtype))
    if declared and declared != fmt:
        warnings.append(f"config.json torch_dtype is {torch_dtype} but the weights are {dominant}; "
                        f"vLLM's --dtype auto computes in {torch_dtype}")
    return FormatDecision(format=fmt, tier=Tier.fp16, method="none", bits=32 if fmt == "fp32" else 16,
                          scheme="w16a16" if fmt != "fp32" else "w32a32",
                          evidence=["config.json has no quantization_config",
                                    f"the 2-D weights are mostly {dominant}"],
                          warnings=warnings, **common)


# ---------------------------------------------------------------- I/O edge


def checksum(paths: Sequence[Path]) -> str:
    """sha256 over the files' bytes in the given order, streamed in 4 MiB chunks."""
    h = hashlib.sha256()
    for p in paths:
        with p.open("rb") as f:
            while chunk := f.read(READ_CHUNK):
                h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def inspect_model_dir(model_dir: Path) -> ModelInspection:
    """Read config.json and the safetensors headers of `model_dir`, decide, and checksum the weights."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise InspectionError(f"{model_dir}: not a directory")
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise InspectionError(f"{config_path}: missing; the quantization config is read from it")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise InspectionError(f"{config_path}: not valid JSON ({e})") from None
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise InspectionError(f"{model_dir}: no *.safetensors files (other weight formats are not inspected)")
    tensors: list[TensorHeader] = []
    try:
        for f in files:
            tensors += read_header(f)
    except HeaderError as e:
        raise InspectionError(str(e)) from None
    decision = decide_format(config, tensors)
    return ModelInspection(**decision.model_dump(), model_dir=str(model_dir.resolve()),
                           files=[f.name for f in files], total_bytes=sum(f.stat().st_size for f in files),
                           checksum=checksum(files))


def build_registration(inspection: ModelInspection, *, node_url: str, deployment: str, model: str | None = None,
                       hardware: str = "unknown", vram_gb: float | None = None) -> NodeIdentity:
    """The `POST /admin/nodes` body for a node serving the inspected artifact. Format, method, tier and
    checksum come from the inspection only; the caller names the deployment and the logical model."""
    return NodeIdentity(url=node_url, model=model or deployment, deployment=deployment,
                            tier=inspection.tier, format=inspection.format, method=inspection.method,
                            checksum=inspection.checksum, hardware=hardware, vram_gb=vram_gb)
