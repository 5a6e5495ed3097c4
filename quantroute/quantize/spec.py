"""What `quantroute quantize` is asked to do and what it records about the artifact it made. Pure: shapes and
the small decisions on them (deployment ids, the tier each scheme must come out as); no I/O.

The record is written next to the weights as `quantroute-artifact.json`, so an artifact carries its own
lineage: which source (by checksum) it was made from, how, with which calibration set (by hash) and which
tool versions. Its `policy_deployment` is exactly the entry the policy's `deployments` map takes.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from quantroute.tiers import Tier

RECORD_FILE = "quantroute-artifact.json"
Scheme = Literal["W8A8", "W4A16", "W4A8", "FP8_DYNAMIC"]
Method = Literal["rtn", "gptq"]
# The tier and weight bits each scheme must come out as, read back from the artifact by the registrar.
SCHEME_TIER: dict[str, tuple[Tier, int]] = {"W8A8": (Tier.int8, 8), "W4A16": (Tier.int4, 4), "W4A8": (Tier.int4, 4),
                                             "FP8_DYNAMIC": (Tier.fp8, 8)}
# Schemes whose weights are quantized in groups (the others: one scale per output channel)
GROUPED = ("W4A16", "W4A8")
SCHEME_TEXT = {"W8A8": "int8 weights per channel, int8 activations per token (dynamic)",
               "W4A16": "int4 weights in groups, 16-bit activations",
               "W4A8": "int4 weights in groups, int8 activations per token (dynamic)",
               "FP8_DYNAMIC": "fp8 (e4m3) weights per channel, fp8 activations per token (dynamic)"}
_ID_SAFE = re.compile(r"[^a-z0-9.-]+")
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CalibrationSet(_Strict):
    """A calibration set as the worker gets it: chat conversations, one per JSONL line."""

    name: str = Field(min_length=1, description="Short name recorded with the artifact, e.g. tiny-skills-train")
    path: str
    sha256: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="Of the file's bytes")
    samples: int = Field(ge=1)


class QuantizeJob(_Strict):
    """What the llm-compressor worker runs (written as JSON; the worker has no quantroute to import)."""

    source_dir: str
    out_dir: str
    scheme: Scheme
    method: Method
    group_size: int | None = Field(default=None, description="W4A16/W4A8 only; None keeps the preset's (128)")
    ignore: list[str] = Field(default_factory=lambda: ["lm_head"])
    calibration: CalibrationSet | None = None
    max_seq_len: int = Field(default=256, ge=16)
    seed: int = 0

    @model_validator(mode="after")
    def _calibration_iff_gptq(self) -> QuantizeJob:
        if self.method == "gptq" and self.calibration is None:
            raise ValueError("method gptq needs a calibration set (--calibration FILE)")
        if self.method == "rtn" and self.calibration is not None:
            raise ValueError("method rtn (round-to-nearest) uses no calibration data; drop --calibration or "
                             "use --method gptq")
        if self.method == "gptq" and self.scheme == "FP8_DYNAMIC":
            # fp8's rounding error is small and unstructured: the preset is data-free and GPTQ has no fp8 path here
            raise ValueError("scheme FP8_DYNAMIC takes no calibration (per-channel weights, dynamic activations); "
                             "use --method rtn")
        if self.group_size is not None and self.scheme not in GROUPED:
            raise ValueError(f"group_size applies to {' and '.join(GROUPED)} only; {self.scheme} quantizes weights "
                             "per channel")
        return self


class WorkerResult(_Strict):
    """What the worker reports on its last stdout line."""

    seconds: float
    tools: dict[str, str] = Field(description="Distribution name -> version, e.g. llmcompressor -> 0.14.0.1")


class PolicyDeployment(_Strict):
    """The entry for the policy's `deployments` map (quantroute.policy.model.DeploymentMeta's fields)."""

    model: str
    format: str
    method: str
    calibration_set: str
    eval_suite: str
    checksum: str


class ArtifactRecord(_Strict):
    """Lineage of one quantized artifact; written next to its weights."""

    deployment: str
    model: str
    tier: Tier
    format: str = Field(description="As the registrar reads it from the artifact: int8, int4, ...")
    container: str = Field(description="Checkpoint format on disk, e.g. compressed-tensors")
    method: Method
    scheme: Scheme
    bits: int
    group_size: int | None
    calibration: CalibrationSet | None
    source_dir: str
    source_deployment: str
    source_checksum: str
    checksum: str = Field(description="sha256 over the artifact's safetensors bytes (the registrar's checksum)")
    tools: dict[str, str]
    created_at: datetime
    seconds: float
    policy_deployment: PolicyDeployment


def base_name(source_deployment: str) -> str:
    """The source's id without its precision suffix: tiny-skills-bf16 -> tiny-skills (the logical model)."""
    return re.sub(r"-(bf16|fp16|fp32|f16)$", "", source_deployment.lower())


def default_deployment_id(source_deployment: str, method: str, scheme: str, group_size: int | None = None) -> str:
    """e.g. tiny-skills-bf16 + rtn + W4A16 -> tiny-skills-rtn-w4a16 (the source's precision suffix dropped:
    the new id names the new precision, never the source's)."""
    parts = [base_name(source_deployment), method, scheme.lower()] + ([f"g{group_size}"] if group_size else [])
    return _ID_SAFE.sub("-", "-".join(parts)).strip("-")


def check_deployment_id(deployment: str, source_deployment: str) -> None:
    """A quantized artifact is never served under the source's id (ARCHITECTURE.md: vocabulary, deployment)."""
    if not _ID_PATTERN.fullmatch(deployment):
        raise ValueError(f"--deployment: {deployment!r} is not a valid id; use letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit")
    if deployment == source_deployment:
        raise ValueError(f"--deployment: {deployment!r} is the source's id; a quantized artifact needs its own "
                         "id (responses name it, so clients can tell what served them)")
